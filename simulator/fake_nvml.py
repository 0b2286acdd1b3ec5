"""A fake GPU server: an NVML backend, a sysfs/proc tree and command outputs, all from one spec.

`FakeMachine` describes a server (identity, CPUs, PCI tree, NICs, GPUs as NVML would answer,
VM guests). `FakeNvmlBackend(machine)` answers the `NvmlBackend` protocol the collector uses;
`materialize(machine, root)` writes the /sys, /proc and /etc files the host layer reads, and
`fake_runner(machine)` answers its commands. The collector therefore runs unchanged against a
fake server: the backend and the root are injected, nothing is patched.

The profiles themselves (8x H100 on NVSwitch, A100 in MIG mode, ...) are in simulator.profiles.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.nvml import (
    ComputeProcess,
    EccLocation,
    GpuFabricInfo,
    MigDeviceInfo,
    NvLinkInfo,
    NvmlError,
    NvmlUnavailableError,
    PcieLink,
)
from agent.pcitopo import classify_pci_paths

LOST = "GPU is lost"


@dataclass
class FakePciDevice:
    """A PCI function in the fake tree; `parent` is a bridge's bus id or the host bridge
    (`pci0000:15`) for functions on a root bus."""

    bus_id: str
    parent: str
    vendor: str
    device: str
    class_code: str
    numa_node: int = -1
    driver: str | None = None
    local_cpus: str | None = None


@dataclass
class FakeNic:
    """A NIC: an RDMA device (`rdma=True`, name mlx5_0, with its netdev) or a plain netdev."""

    name: str
    pci_bus_id: str
    netdev: str | None
    kind: str = "ethernet"
    mac: str | None = None
    speed_mbps: int | None = None
    up: bool = True
    rdma: bool = False
    node_guid: str | None = None  # as sysfs prints it: b83f:d203:0093:c7a2
    lid: int | None = None
    addresses: list[str] = field(default_factory=list)
    device_subdir: str | None = None  # virtio NICs: the netdev hangs below virtioN


@dataclass
class FakeGpu:
    """A GPU as NVML answers for it. Methods named in `unsupported` answer None (NotSupported);
    once a method named in `fail_from` is called, that and every later call raise NvmlError
    ("GPU is lost"), like a GPU that drops off mid-walk."""

    uuid: str
    pci_bus_id: str  # NVML's form: 00000000:19:00.0
    name: str
    serial: str | None = None
    board_part_number: str | None = None
    architecture: str | None = None
    compute_capability: tuple[int, int] | None = None
    memory_total_bytes: int | None = None
    power_limit_mw: int | None = None
    vbios_version: str | None = None
    cpu_affinity: list[int] | None = None
    persistence_mode: bool | None = True
    mig_mode: tuple[bool, bool] | None = (False, False)
    ecc_mode: bool | None = True
    ecc_corrected: int | None = 0
    ecc_uncorrected: int | None = 0
    retired_pages: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows: tuple[int, int, bool, bool] | None = (0, 0, False, False)
    nvlinks: list[NvLinkInfo] = field(default_factory=list)
    mig_devices: list[MigDeviceInfo] = field(default_factory=list)
    unsupported: frozenset[str] = frozenset({"numa_node"})
    fail_from: str | None = None
    # health counters; pcie None: the architecture's link at full width (Hopper gen 5, x16)
    ecc_volatile: tuple[int | None, int | None] | None = (0, 0)
    ecc_locations: list[EccLocation] = field(default_factory=list)
    retired_by_cause: tuple[int, int] | None = None
    pcie: PcieLink | None = None
    pcie_replays: int | None = 0
    performance_state: int | None = 8  # idle
    clock_reasons: int | None = 0x1  # idle
    nvlink_errors: tuple[int, int, int] | None = (0, 0, 0)
    recovery_action: str | None = "none"
    # NVLink fabric (GB200 NVL72): None answers like a GPU outside one (NotSupported)
    fabric: GpuFabricInfo | None = None
    # what runs now: the GPU's own compute processes, and each MIG device's by its UUID;
    # `processes_error` makes the processes call fail with that NVML reason ("Not Supported")
    processes: list[ComputeProcess] = field(default_factory=list)
    mig_processes: dict[str, list[ComputeProcess]] = field(default_factory=dict)
    processes_error: str | None = None


@dataclass
class FakeDisk:
    """A block device under /sys/block: NVMe (a controller on a PCI function) or SATA/SAS
    (a SCSI device below an HBA's PCI function)."""

    name: str
    pci_bus_id: str
    model: str
    serial: str
    size_bytes: int
    transport: str = "nvme"
    rotational: bool = False
    link_speed: str = "16.0 GT/s PCIe"
    link_width: int = 4


@dataclass
class FakeMachine:
    """One fake server: everything the agent would find on it."""

    profile: str
    hostname: str
    domain: str | None = None
    system_uuid: str | None = None
    machine_id: str | None = None
    vendor: str | None = None
    product: str | None = None
    serial: str | None = None
    cpu_model: str = "Intel(R) Xeon(R) Platinum 8480C"
    sockets: int = 2
    cores_per_socket: int = 56
    threads_per_core: int = 2
    memory_bytes: int = 2 * 1024**4
    numa_nodes: int = 2
    os_name: str = "Ubuntu 22.04.4 LTS"
    kernel: str = "5.15.0-1042-nvidia"
    virtualization: str = "none"
    driver_version: str | None = "535.161.08"
    cuda_version: str | None = "12.2"
    nvml_version: str | None = "12.535.161.08"
    nvml_error: str | None = None
    gpus: list[FakeGpu] = field(default_factory=list)
    pci: list[FakePciDevice] = field(default_factory=list)
    nics: list[FakeNic] = field(default_factory=list)
    guests: list[tuple[str, str, bool]] = field(default_factory=list)  # uuid, name, running
    disks: list[FakeDisk] = field(default_factory=list)
    # LLDP neighbours lldpd would list: netdev -> (switch name, chassis MAC, port id, descr, mgmt)
    lldp: dict[str, tuple[str, str, str, str, str]] = field(default_factory=dict)
    rack: str | None = None
    # what /proc says of the GPUs' processes: pid -> (comm, /proc/PID/cgroup text)
    processes: dict[int, tuple[str, str]] = field(default_factory=dict)

    def pci_device(self, bus_id: str) -> FakePciDevice | None:
        want = _short_bus(bus_id)
        return next((d for d in self.pci if d.bus_id == want), None)

    def pci_path(self, bus_id: str) -> list[str]:
        """[host bridge, bridges..., bus_id] for a function of the tree."""
        chain: list[str] = []
        device = self.pci_device(bus_id)
        while device is not None:
            chain.append(device.bus_id)
            parent = device.parent
            if parent.startswith("pci"):
                chain.append(parent)
                break
            device = self.pci_device(parent)
        return list(reversed(chain))

    def cpu_ids(self) -> list[tuple[int, int, int]]:
        """(logical cpu, socket, core) the Linux way: all first threads, then the siblings."""
        ids = []
        per_thread = self.sockets * self.cores_per_socket
        for thread in range(self.threads_per_core):
            for socket in range(self.sockets):
                for core in range(self.cores_per_socket):
                    ids.append(
                        (thread * per_thread + socket * self.cores_per_socket + core, socket, core)
                    )
        return sorted(ids)

    def node_cpus(self, node: int) -> list[int]:
        """Logical CPUs of NUMA node `node` (nodes split the cores evenly, in order)."""
        per_node = self.sockets * self.cores_per_socket // self.numa_nodes
        per_thread = self.sockets * self.cores_per_socket
        first = node * per_node
        return [
            thread * per_thread + core
            for thread in range(self.threads_per_core)
            for core in range(first, first + per_node)
        ]


def _short_bus(bus_id: str) -> str:
    """00000000:19:00.0 -> 0000:19:00.0 (NVML pads the domain to 8 digits)."""
    bus_id = bus_id.lower()
    domain, _, rest = bus_id.partition(":")
    return f"{int(domain, 16):04x}:{rest}" if rest.count(":") == 1 else bus_id


def nvml_bus(bus_id: str) -> str:
    """0000:19:00.0 -> 00000000:19:00.0, upper-case, as NVML prints it."""
    domain, _, rest = bus_id.partition(":")
    return f"{int(domain, 16):08X}:{rest.upper()}"


# -- the NVML side ----------------------------------------------------------------------------


class FakeNvmlBackend:
    """NvmlBackend over a FakeMachine. Counts calls, so tests can prove handle caching."""

    source = "simulator"

    def __init__(self, machine: FakeMachine) -> None:
        self.machine = machine
        self.calls: Counter[str] = Counter()
        self._lost: set[int] = set()

    def init(self) -> None:
        self.calls["init"] += 1
        if self.machine.nvml_error:
            raise NvmlUnavailableError(self.machine.nvml_error)

    def shutdown(self) -> None:
        self.calls["shutdown"] += 1

    def driver_version(self) -> str | None:
        return self.machine.driver_version

    def cuda_driver_version(self) -> str | None:
        return self.machine.cuda_version

    def nvml_version(self) -> str | None:
        return self.machine.nvml_version

    def device_count(self) -> int:
        self.calls["device_count"] += 1
        return len(self.machine.gpus)

    def handle(self, index: int) -> FakeGpu:
        self.calls["handle"] += 1
        if index >= len(self.machine.gpus):
            raise NvmlError("Invalid Argument", call="nvmlDeviceGetHandleByIndex")
        return self.machine.gpus[index]

    def _get(self, gpu: FakeGpu, method: str, value: Any) -> Any:
        self.calls[method] += 1
        if id(gpu) in self._lost or gpu.fail_from == method:
            self._lost.add(id(gpu))
            raise NvmlError(LOST, call=method, kind="NVMLError_GpuIsLost")
        if method in gpu.unsupported:
            return None
        return value

    def uuid(self, handle: FakeGpu) -> str | None:
        return self._get(handle, "uuid", handle.uuid)

    def serial(self, handle: FakeGpu) -> str | None:
        return self._get(handle, "serial", handle.serial)

    def name(self, handle: FakeGpu) -> str | None:
        return self._get(handle, "name", handle.name)

    def board_part_number(self, handle: FakeGpu) -> str | None:
        return self._get(handle, "board_part_number", handle.board_part_number)

    def architecture(self, handle: FakeGpu) -> str | None:
        return self._get(handle, "architecture", handle.architecture)

    def compute_capability(self, handle: FakeGpu) -> tuple[int, int] | None:
        return self._get(handle, "compute_capability", handle.compute_capability)

    def pci_bus_id(self, handle: FakeGpu) -> str | None:
        return self._get(handle, "pci_bus_id", handle.pci_bus_id)

    def memory_total_bytes(self, handle: FakeGpu) -> int | None:
        return self._get(handle, "memory_total_bytes", handle.memory_total_bytes)

    def power_limit_mw(self, handle: FakeGpu) -> int | None:
        return self._get(handle, "power_limit_mw", handle.power_limit_mw)

    def vbios_version(self, handle: FakeGpu) -> str | None:
        return self._get(handle, "vbios_version", handle.vbios_version)

    def numa_node(self, handle: FakeGpu) -> int | None:
        device = self.machine.pci_device(handle.pci_bus_id)
        return self._get(handle, "numa_node", device.numa_node if device else None)

    def cpu_affinity(self, handle: FakeGpu) -> list[int] | None:
        return self._get(handle, "cpu_affinity", handle.cpu_affinity)

    def persistence_mode(self, handle: FakeGpu) -> bool | None:
        return self._get(handle, "persistence_mode", handle.persistence_mode)

    def mig_mode(self, handle: FakeGpu) -> tuple[bool, bool] | None:
        return self._get(handle, "mig_mode", handle.mig_mode)

    def ecc_mode(self, handle: FakeGpu) -> bool | None:
        return self._get(handle, "ecc_mode", handle.ecc_mode)

    def ecc_errors(self, handle: FakeGpu, *, uncorrected: bool) -> int | None:
        value = handle.ecc_uncorrected if uncorrected else handle.ecc_corrected
        return self._get(handle, "ecc_errors", value)

    def retired_pages(self, handle: FakeGpu) -> int | None:
        return self._get(handle, "retired_pages", handle.retired_pages)

    def retired_pages_pending(self, handle: FakeGpu) -> bool | None:
        return self._get(handle, "retired_pages_pending", handle.retired_pages_pending)

    def remapped_rows(self, handle: FakeGpu) -> tuple[int, int, bool, bool] | None:
        return self._get(handle, "remapped_rows", handle.remapped_rows)

    def nvlinks(self, handle: FakeGpu) -> list[NvLinkInfo]:
        return self._get(handle, "nvlinks", list(handle.nvlinks)) or []

    def common_ancestor(self, handle_a: FakeGpu, handle_b: FakeGpu) -> str | None:
        self.calls["common_ancestor"] += 1
        if id(handle_a) in self._lost or id(handle_b) in self._lost:
            raise NvmlError(LOST, call="common_ancestor", kind="NVMLError_GpuIsLost")
        a = self.machine.pci_device(handle_a.pci_bus_id)
        b = self.machine.pci_device(handle_b.pci_bus_id)
        if a is None or b is None:
            return None
        return classify_pci_paths(
            self.machine.pci_path(a.bus_id),
            self.machine.pci_path(b.bus_id),
            a.numa_node,
            b.numa_node,
        )

    def mig_devices(self, handle: FakeGpu) -> list[MigDeviceInfo]:
        return self._get(handle, "mig_devices", list(handle.mig_devices)) or []

    def ecc_volatile(self, handle: FakeGpu) -> tuple[int | None, int | None] | None:
        return self._get(handle, "ecc_volatile", handle.ecc_volatile)

    def ecc_locations(self, handle: FakeGpu) -> list[EccLocation]:
        return self._get(handle, "ecc_locations", list(handle.ecc_locations)) or []

    def retired_pages_by_cause(self, handle: FakeGpu) -> tuple[int, int] | None:
        return self._get(handle, "retired_pages_by_cause", handle.retired_by_cause)

    def pcie_link(self, handle: FakeGpu) -> PcieLink | None:
        gen = _PCIE_GEN.get(handle.architecture or "", 4)
        return self._get(handle, "pcie_link", handle.pcie or PcieLink(gen, gen, 16, 16))

    def pcie_replay_count(self, handle: FakeGpu) -> int | None:
        return self._get(handle, "pcie_replay_count", handle.pcie_replays)

    def performance_state(self, handle: FakeGpu) -> int | None:
        return self._get(handle, "performance_state", handle.performance_state)

    def clock_event_reasons(self, handle: FakeGpu) -> int | None:
        return self._get(handle, "clock_event_reasons", handle.clock_reasons)

    def nvlink_error_totals(self, handle: FakeGpu) -> tuple[int, int, int] | None:
        return self._get(handle, "nvlink_error_totals", handle.nvlink_errors)

    def recovery_action(self, handle: FakeGpu) -> str | None:
        return self._get(handle, "recovery_action", handle.recovery_action)

    def gpu_fabric(self, handle: FakeGpu) -> GpuFabricInfo | None:
        return self._get(handle, "gpu_fabric", handle.fabric)

    def _processes_check(self, handle: FakeGpu, method: str) -> None:
        self._get(handle, method, None)  # a lost GPU stays lost
        if handle.processes_error:
            kind = "NVMLError_" + handle.processes_error.title().replace(" ", "")
            raise NvmlError(handle.processes_error, call=method, kind=kind)

    def compute_processes(self, handle: FakeGpu) -> list[ComputeProcess]:
        self._processes_check(handle, "compute_processes")
        return sorted(handle.processes, key=lambda p: p.pid)

    def mig_compute_processes(self, handle: FakeGpu) -> dict[str, list[ComputeProcess]]:
        self._processes_check(handle, "mig_compute_processes")
        return {
            uuid: sorted(found, key=lambda p: p.pid) for uuid, found in handle.mig_processes.items()
        }


_PCIE_GEN = {"Hopper": 5, "Blackwell": 5}


# -- the host side ----------------------------------------------------------------------------


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") else text + "\n", "utf-8")


def _link(root: Path, rel: str, target_rel: str) -> None:
    """A relative symlink, as sysfs has them, so the tree resolves inside any root."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    (root / target_rel).mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(root / target_rel, path.parent), path)


def _cpuinfo(machine: FakeMachine) -> str:
    flags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov sse sse2 ht avx avx2"
    if machine.virtualization != "none":
        flags += " hypervisor"
    blocks = []
    siblings = machine.cores_per_socket * machine.threads_per_core
    for cpu, socket, core in machine.cpu_ids():
        blocks.append(
            f"processor\t: {cpu}\nvendor_id\t: GenuineIntel\nmodel name\t: {machine.cpu_model}\n"
            f"physical id\t: {socket}\nsiblings\t: {siblings}\n"
            f"core id\t\t: {core}\ncpu cores\t: {machine.cores_per_socket}\nflags\t\t: {flags}\n"
        )
    return "\n".join(blocks)


def materialize(machine: FakeMachine, root: str | os.PathLike[str]) -> Path:
    """Write the files the host layer reads (a small, faithful slice of /sys, /proc, /etc)."""
    root = Path(root)
    dmi = "sys/class/dmi/id"
    for name, value in (
        ("product_uuid", machine.system_uuid),
        ("sys_vendor", machine.vendor),
        ("product_name", machine.product),
        ("product_serial", machine.serial),
    ):
        if value is not None:
            _write(root, f"{dmi}/{name}", value)
    if machine.machine_id:
        _write(root, "etc/machine-id", machine.machine_id)
    _write(
        root,
        "etc/os-release",
        f'NAME="{machine.os_name.split()[0]}"\nPRETTY_NAME="{machine.os_name}"',
    )
    _write(root, "proc/sys/kernel/hostname", machine.hostname)
    _write(root, "proc/sys/kernel/domainname", machine.domain or "(none)")
    _write(root, "proc/sys/kernel/osrelease", machine.kernel)
    _write(root, "proc/cpuinfo", _cpuinfo(machine))
    for pid, (comm, cgroup) in machine.processes.items():
        _write(root, f"proc/{pid}/comm", comm)
        _write(root, f"proc/{pid}/cgroup", cgroup)
    _write(
        root, "proc/meminfo", f"MemTotal:       {machine.memory_bytes // 1024} kB\nMemFree: 1 kB"
    )
    for node in range(machine.numa_nodes):
        _write(root, f"sys/devices/system/node/node{node}/cpulist", "")

    device_dirs: dict[str, str] = {}
    for device in machine.pci:
        path = "/".join(machine.pci_path(device.bus_id))
        rel = f"sys/devices/{path}"
        device_dirs[device.bus_id] = rel
        _write(root, f"{rel}/vendor", device.vendor)
        _write(root, f"{rel}/device", device.device)
        _write(root, f"{rel}/class", device.class_code)
        _write(root, f"{rel}/numa_node", str(device.numa_node))
        if device.local_cpus:
            _write(root, f"{rel}/local_cpulist", device.local_cpus)
        if device.driver:
            _link(root, f"{rel}/driver", f"sys/bus/pci/drivers/{device.driver}")
        _link(root, f"sys/bus/pci/devices/{device.bus_id}", rel)

    for nic in machine.nics:
        pci_dir = device_dirs[nic.pci_bus_id]
        dev_dir = f"{pci_dir}/{nic.device_subdir}" if nic.device_subdir else pci_dir
        if nic.netdev:
            net = f"sys/class/net/{nic.netdev}"
            (root / f"{dev_dir}/net/{nic.netdev}").mkdir(parents=True, exist_ok=True)
            _link(root, f"{net}/device", dev_dir)
            _write(root, f"{net}/address", nic.mac or "00:00:00:00:00:00")
            _write(root, f"{net}/operstate", "up" if nic.up else "down")
            _write(root, f"{net}/type", "32" if nic.kind == "infiniband" else "1")
            if nic.speed_mbps and not nic.rdma:
                _write(root, f"{net}/speed", str(nic.speed_mbps if nic.up else -1))
        if nic.rdma:
            ib = f"sys/class/infiniband/{nic.name}"
            _link(root, f"{ib}/device", pci_dir)
            layer = "InfiniBand" if nic.kind == "infiniband" else "Ethernet"
            _write(root, f"{ib}/ports/1/link_layer", layer)
            _write(root, f"{ib}/ports/1/state", "4: ACTIVE" if nic.up else "1: DOWN")
            gbps = (nic.speed_mbps or 0) // 1000
            width = {400: "4X NDR", 200: "4X HDR", 100: "4X EDR"}.get(gbps, "4X")
            _write(root, f"{ib}/ports/1/rate", f"{gbps} Gb/sec ({width})")
            _write(root, f"{ib}/ports/1/phys_state", "5: LinkUp" if nic.up else "3: Disabled")
            _write(root, f"{ib}/ports/1/lid", f"0x{nic.lid or 0:x}")
            if nic.node_guid:
                _write(root, f"{ib}/node_guid", nic.node_guid)
                # a ConnectX port's GUID is its node GUID; GID 0 is fe80::<port GUID>
                gid = "fe80:0000:0000:0000:" + nic.node_guid if layer == "InfiniBand" else None
                _write(
                    root, f"{ib}/ports/1/gids/0", gid or "fe80:0000:0000:0000:0000:0000:0000:0000"
                )

    for disk in machine.disks:
        _disk(root, disk, device_dirs[disk.pci_bus_id])

    for uuid, name, running in machine.guests:
        _write(
            root,
            f"etc/libvirt/qemu/{name}.xml",
            f"<domain type='kvm'>\n  <name>{name}</name>\n  <uuid>{uuid}</uuid>\n</domain>",
        )
        if running:
            _write(root, f"run/libvirt/qemu/{name}.pid", "4242")
    return root


def _disk(root: Path, disk: FakeDisk, pci_dir: str) -> None:
    """A disk as the kernel lays it out: NVMe namespaces below their controller, SCSI disks
    below their HBA's host and target; /sys/block/<name> links to the block device."""
    if disk.transport == "nvme":
        controller = f"{pci_dir}/nvme/nvme{disk.name[4:].split('n')[0]}"
        block = f"{controller}/{disk.name}"
        _link(root, f"{block}/device", controller)
        _link(root, f"{controller}/device", pci_dir)
        _write(root, f"{pci_dir}/current_link_speed", disk.link_speed)
        _write(root, f"{pci_dir}/current_link_width", str(disk.link_width))
        device = controller
    else:
        port = "ata1" if disk.transport == "sata" else "host0/port-0:0/end_device-0:0"
        device = f"{pci_dir}/{port}/host0/target0:0:0/0:0:0:0"
        block = f"{device}/block/{disk.name}"
        _link(root, f"{block}/device", device)
    _write(root, f"{device}/model", disk.model)
    _write(root, f"{device}/serial", disk.serial)
    _write(root, f"{block}/size", str(disk.size_bytes // 512))
    _write(root, f"{block}/queue/rotational", "1" if disk.rotational else "0")
    _link(root, f"sys/block/{disk.name}", block)


def lldp_json0(machine: FakeMachine) -> str:
    """What `lldpcli -f json0 show neighbors details` prints for the machine's neighbours."""
    interfaces = [
        {
            "name": netdev,
            "via": "LLDP",
            "rid": str(number),
            "age": "0 day, 01:02:03",
            "chassis": [
                {
                    "id": [{"type": "mac", "value": chassis}],
                    "name": [{"value": switch}],
                    "descr": [{"value": "Cumulus Linux version 5.9.1"}],
                    "mgmt-ip": [{"value": mgmt}],
                    "capability": [{"type": "Bridge", "enabled": True}],
                }
            ],
            "port": [
                {
                    "id": [{"type": "ifname", "value": port}],
                    "descr": [{"value": descr}],
                    "ttl": [{"value": "120"}],
                }
            ],
        }
        for number, (netdev, (switch, chassis, port, descr, mgmt)) in enumerate(
            sorted(machine.lldp.items()), start=1
        )
    ]
    return json.dumps({"lldp": [{"interface": interfaces}]}, indent=2) + "\n"


def fake_runner(machine: FakeMachine) -> Callable[[Sequence[str]], str | None]:
    """Answers the host layer's commands as this machine would."""

    def run(argv: Sequence[str]) -> str | None:
        if list(argv[:2]) == ["ip", "-o"]:
            lines = ["1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever"]
            for number, nic in enumerate(machine.nics, start=2):
                for address in nic.addresses if nic.netdev else []:
                    family = "inet6" if ":" in address else "inet"
                    lines.append(
                        f"{number}: {nic.netdev}    {family} {address} scope global {nic.netdev}"
                        "\\       valid_lft forever preferred_lft forever"
                    )
            return "\n".join(lines) + "\n"
        if argv and argv[0] == "lldpcli":
            return lldp_json0(machine) if machine.lldp else None  # lldpd not running
        if argv and argv[0] == "systemd-detect-virt":
            return machine.virtualization + "\n"
        return None

    return run
