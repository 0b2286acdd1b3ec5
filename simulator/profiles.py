"""Fake server profiles: realistic machines for tests, benchmarks and the fleet simulator.

Each builder takes a seeded `random.Random` (identities, serials and MACs are random but
reproducible) and a hostname, and returns a `FakeMachine`:

- `h100`: DGX H100 class, 8x H100 SXM on 4 NVSwitches (NV18 all-to-all), each GPU sharing a
  PCIe switch with its ConnectX-7 (PIX), 2 sockets (NODE within, SYS across);
- `h100-lost`: the same with one GPU fallen off the bus (on PCI, driver nvidia, not in NVML);
- `h100-gpu-error`: the same with one GPU failing mid-walk (Xid 79: "GPU is lost");
- `a100-mig`: DGX A100 class, 8x A100 SXM 80GB on 6 NVSwitches (NV12), two-level PCIe
  switches (PXB between pair GPUs), 8 NUMA nodes, four GPUs in MIG mode in mixed layouts
  and one with MIG pending a reset;
- `l40s`: 4x L40S on PCIe (PIX, NODE, SYS; no NVLink, no MIG), persistence mode off;
- `cpu-only`: a login node without NVIDIA driver;
- `kvm-host`: a KVM host whose 4 H100 PCIe are bound to vfio-pci, with two guests;
- `kvm-vm`: a guest with two passed-through H100 PCIe; its system UUID is its domain UUID;
- `gb200`: a GB200 NVL72 compute tray: 2 Grace CPUs, 4 Blackwell GPUs whose 18 NVLinks each
  reach the rack's NVSwitch trays (one NVLink fabric per 18 trays: same cluster UUID and
  clique), 4 ConnectX-7 NDR.

InfiniBand NICs carry node GUIDs (and LIDs) as sysfs prints them; the DGX-class profiles
have NVMe drives (two M.2 for the OS, U.2 for data).
"""

from __future__ import annotations

import random
import uuid as uuidlib
from collections.abc import Callable

from agent.nvml import GpuFabricInfo, MigDeviceInfo, NvLinkInfo, cpu_list

from .fake_nvml import FakeDisk, FakeGpu, FakeMachine, FakeNic, FakePciDevice, nvml_bus

MIB = 1024 * 1024
BRIDGE = "0x060400"
DOMAIN = "cluster.example.com"


def rand_uuid(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


def _serial(rng: random.Random, prefix: str = "16501240", digits: int = 13) -> str:
    return prefix + "".join(rng.choice("0123456789") for _ in range(digits - len(prefix)))


def _mac(rng: random.Random, oui: str = "b8:3f:d2") -> str:
    return oui + "".join(f":{rng.randrange(256):02x}" for _ in range(3))


def _ipoib_address(rng: random.Random) -> str:
    guid = ":".join(f"{rng.randrange(256):02x}" for _ in range(8))
    return f"00:00:10:49:fe:80:00:00:00:00:00:00:{guid}"


def _guid(rng: random.Random) -> str:
    """A node GUID as sysfs prints it (`b83f:d203:0093:c7a2`), in NVIDIA's OUI."""
    return "b83f:d203:" + ":".join(f"{rng.randrange(65536):04x}" for _ in range(2))


def _lid(rng: random.Random) -> int:
    return rng.randrange(0x100, 0xC000)


def _nvme_drives(
    tree: _Tree, rng: random.Random, *, os_root: int, data: tuple[tuple[int, int, int], ...]
) -> list[FakeDisk]:
    """Two M.2 OS drives on `os_root`, and per (root bus, NUMA node, count) U.2 data drives
    on that root's ports. Names follow the kernel's probe order."""
    disks: list[FakeDisk] = []
    slots = [(os_root, 0, "SAMSUNG MZ1L21T9HCLS-00A07", 1920383410176, "0xa80a")] * 2
    for root, numa, count in data:
        slots += [(root, numa, "SAMSUNG MZWLR3T8HCLS-00A07", 3840755982336, "0xa824")] * count
    used: dict[int, int] = {}
    for number, (root, numa, model, size, device) in enumerate(slots):
        used[root] = used.get(root, 0) + 1
        port = tree.root_port(root, numa, port=used[root])
        bus = tree.add(
            port,
            f"0000:{root + used[root]:02x}:00.0",
            "0x144d",
            device,
            "0x010802",
            numa=numa,
            driver="nvme",
        )
        disks.append(
            FakeDisk(
                name=f"nvme{number}n1",
                pci_bus_id=bus,
                model=model,
                serial="S6"
                + "".join(rng.choice("0123456789ABCDEFGHJKLMNPRSTVWXYZ") for _ in range(12)),
                size_bytes=size,
                link_width=4,
                link_speed="16.0 GT/s PCIe",
            )
        )
    return disks


class _Tree:
    """Builds a PCI tree: host bridges, root ports, switches and endpoints."""

    def __init__(self, machine: FakeMachine) -> None:
        self.machine = machine

    def add(
        self,
        parent: str,
        bus_id: str,
        vendor: str,
        device: str,
        class_code: str = BRIDGE,
        *,
        numa: int = -1,
        driver: str | None = None,
    ) -> str:
        local = cpu_list(self.machine.node_cpus(numa)) if numa >= 0 else None
        self.machine.pci.append(
            FakePciDevice(bus_id, parent, vendor, device, class_code, numa, driver, local)
        )
        return bus_id

    def switch(self, parent: str, bus: int, ports: int, numa: int) -> list[str]:
        """A PCIe switch below `parent`: upstream port on `bus`, downstream ports on bus+1.
        Returns the downstream ports; endpoint i goes on bus (bus + 2 + i)."""
        up = self.add(parent, f"0000:{bus:02x}:00.0", "0x1000", "0xc030", numa=numa)
        return [
            self.add(up, f"0000:{bus + 1:02x}:{port:02x}.0", "0x1000", "0xc030", numa=numa)
            for port in range(ports)
        ]

    def root_port(self, root_bus: int, numa: int, port: int = 1) -> str:
        return self.add(
            f"pci0000:{root_bus:02x}",
            f"0000:{root_bus:02x}:{port:02x}.0",
            "0x8086",
            "0x352a",
            numa=numa,
        )


def _base(rng: random.Random, profile: str, hostname: str, **kwargs: object) -> FakeMachine:
    machine = FakeMachine(
        profile=profile,
        hostname=hostname,
        domain=DOMAIN,
        system_uuid=rand_uuid(rng),
        machine_id=f"{rng.getrandbits(128):032x}",
        **kwargs,  # type: ignore[arg-type]
    )
    return machine


def _mgmt_nic(tree: _Tree, rng: random.Random, number: int, *, name: str = "eno1") -> FakeNic:
    bus = tree.add(
        tree.root_port(0x00, 0, port=0x1C),
        "0000:01:00.0",
        "0x8086",
        "0x1572",
        "0x020000",
        numa=0,
        driver="i40e",
    )
    return FakeNic(
        name=name,
        netdev=name,
        pci_bus_id=bus,
        mac=_mac(rng, "3c:ec:ef"),
        speed_mbps=10000,
        addresses=[f"10.40.{number // 200}.{number % 200 + 20}/16"],
    )


def _h100_gpu(rng: random.Random, bus: str, numa_cpus: list[int]) -> FakeGpu:
    return FakeGpu(
        uuid=f"GPU-{rand_uuid(rng)}",
        pci_bus_id=nvml_bus(bus),
        name="NVIDIA H100 80GB HBM3",
        serial=_serial(rng),
        board_part_number="692-2G520-0200-000",
        architecture="Hopper",
        compute_capability=(9, 0),
        memory_total_bytes=81559 * MIB,
        power_limit_mw=700000,
        vbios_version="96.00.74.00.0D",
        cpu_affinity=numa_cpus,
    )


def h100(rng: random.Random, hostname: str, number: int = 1) -> FakeMachine:
    """DGX H100 class: 8x H100 SXM, NVSwitch, 8x ConnectX-7 NDR, 2x Xeon 8480C."""
    machine = _base(
        rng, "h100", hostname, vendor="NVIDIA", product="DGXH100", serial=_serial(rng, "1660223")
    )
    tree = _Tree(machine)
    nics = [_mgmt_nic(tree, rng, number)]
    switches = []
    for k in range(4):  # the NVSwitch chips sit on the PCIe tree too (class 0x0680, bridge)
        port = tree.root_port(0x00, 0, port=k + 2)
        switches.append(
            tree.add(
                port,
                f"0000:{0x05 + k:02x}:00.0",
                "0x10de",
                "0x22a3",
                "0x068000",
                numa=0,
                driver="nvidia-nvswitch",
            )
        )
    links_per_switch = (5, 4, 4, 5)
    for i, gpu_bus in enumerate((0x19, 0x3B, 0x4C, 0x5D, 0x9B, 0xBB, 0xCB, 0xDB)):
        numa = 0 if i < 4 else 1
        root = gpu_bus - 4
        down = tree.switch(tree.root_port(root, numa), root + 1, 2, numa)
        nic_bus = tree.add(
            down[0],
            f"0000:{root + 3:02x}:00.0",
            "0x15b3",
            "0x1021",
            "0x020700",
            numa=numa,
            driver="mlx5_core",
        )
        gpu_pci = tree.add(
            down[1],
            f"0000:{gpu_bus:02x}:00.0",
            "0x10de",
            "0x2330",
            "0x030200",
            numa=numa,
            driver="nvidia",
        )
        gpu = _h100_gpu(rng, gpu_pci, machine.node_cpus(numa))
        link = 0
        for switch, count in zip(switches, links_per_switch, strict=True):
            for _ in range(count):
                gpu.nvlinks.append(NvLinkInfo(link, True, nvml_bus(switch), "switch"))
                link += 1
        machine.gpus.append(gpu)
        nics.append(
            FakeNic(
                name=f"mlx5_{i}",
                netdev=f"ibp{root + 3}s0",
                pci_bus_id=nic_bus,
                kind="infiniband",
                mac=_ipoib_address(rng),
                speed_mbps=400000,
                rdma=True,
                node_guid=":".join(f"{rng.randrange(65536):04x}" for _ in range(4)),
                addresses=[f"192.168.{i}.{number % 250 + 1}/24"],
            )
        )
    machine.nics = nics
    for nic in nics:
        if nic.rdma:
            nic.lid = _lid(rng)
    machine.disks = _nvme_drives(tree, rng, os_root=0x60, data=((0x70, 0, 4), (0xE0, 1, 4)))
    return machine


def h100_lost(rng: random.Random, hostname: str, number: int = 1) -> FakeMachine:
    """An H100 server whose GPU 5 fell off the bus: on PCI (driver nvidia), absent from NVML.
    Its peers lose their NVLinks to nothing (they reach the switches, not the lost GPU)."""
    machine = h100(rng, hostname, number)
    machine.profile = "h100-lost"
    del machine.gpus[5]
    return machine


def h100_gpu_error(rng: random.Random, hostname: str, number: int = 1) -> FakeMachine:
    """An H100 server whose GPU 3 answers its identity, then 'GPU is lost' (Xid 79)."""
    machine = h100(rng, hostname, number)
    machine.profile = "h100-gpu-error"
    machine.gpus[3].fail_from = "power_limit_mw"
    # and one dead NVLink on GPU 6: the pairs with GPU 6 drop to NV17
    gpu6 = machine.gpus[6]
    gpu6.nvlinks[17] = NvLinkInfo(17, False, None, None)
    return machine


# A100 SXM4 80GB: (profile, SMs, memory MiB, placement size in memory slices)
_A100_PROFILES = {
    "1g.10gb": (14, 9728, 1),
    "2g.20gb": (28, 19968, 2),
    "3g.40gb": (42, 40192, 4),
    "4g.40gb": (56, 40192, 4),
    "7g.80gb": (98, 80896, 8),
}


def _mig(
    rng: random.Random, profile: str, gi: int, start: int, ci: int = 0, ci_of: int | None = None
) -> MigDeviceInfo:
    """A MIG device; `ci_of` splits the GPU instance into that many compute instances."""
    sms, memory, size = _A100_PROFILES[profile]
    name = profile
    if ci_of:
        sms //= ci_of
        name = f"1c.{profile}"
    return MigDeviceInfo(
        uuid=f"MIG-{rand_uuid(rng)}",
        gpu_instance_id=gi,
        compute_instance_id=ci,
        profile=name,
        memory_bytes=memory * MIB,
        sm_count=sms,
        placement_start=start,
        placement_size=size,
    )


def a100_mig(rng: random.Random, hostname: str, number: int = 1) -> FakeMachine:
    """DGX A100 class in MIG mode: mixed layouts on GPUs 0-3, MIG pending on GPU 4."""
    machine = _base(
        rng,
        "a100-mig",
        hostname,
        vendor="NVIDIA",
        product="DGXA100 920-23687-2530-000",
        serial=_serial(rng, "1562220"),
        cpu_model="AMD EPYC 7742 64-Core Processor",
        cores_per_socket=64,
        numa_nodes=8,
        memory_bytes=1024**4,
        driver_version="550.54.15",
        cuda_version="12.4",
        nvml_version="12.550.54.15",
        kernel="5.15.0-1040-nvidia",
    )
    tree = _Tree(machine)
    nics = [_mgmt_nic(tree, rng, number)]
    switches = []
    for k in range(6):
        port = tree.root_port(0x00, 0, port=k + 2)
        switches.append(
            tree.add(
                port,
                f"0000:{0xC0 + k:02x}:00.0",
                "0x10de",
                "0x1af1",
                "0x068000",
                numa=0,
                driver="nvidia-nvswitch",
            )
        )
    # GPU pairs share a two-level PCIe switch; NUMA nodes as on a DGX A100 (NPS4)
    pair_roots = (0x10, 0x40, 0x80, 0xB0)
    pair_numa = (3, 1, 7, 5)
    layouts: list[list[MigDeviceInfo]] = [
        [_mig(rng, "1g.10gb", 7 + s, s) for s in range(7)],
        [
            _mig(rng, "3g.40gb", 2, 4),
            _mig(rng, "2g.20gb", 3, 0),
            _mig(rng, "1g.10gb", 9, 2),
            _mig(rng, "1g.10gb", 10, 3),
        ],
        [_mig(rng, "4g.40gb", 1, 0), _mig(rng, "3g.40gb", 2, 4)],
        [
            _mig(rng, "4g.40gb", 1, 0),
            *(_mig(rng, "3g.40gb", 2, 4, ci=c, ci_of=3) for c in range(3)),
        ],
    ]
    index = 0
    for root, numa in zip(pair_roots, pair_numa, strict=True):
        top = tree.switch(tree.root_port(root, numa), root + 1, 2, numa)
        for side in range(2):
            base_bus = root + 3 + side * 6
            inner = tree.switch(top[side], base_bus, 2, numa)
            gpu_bus = tree.add(
                inner[0],
                f"0000:{base_bus + 2:02x}:00.0",
                "0x10de",
                "0x20b2",
                "0x030200",
                numa=numa,
                driver="nvidia",
            )
            nic_bus = tree.add(
                inner[1],
                f"0000:{base_bus + 3:02x}:00.0",
                "0x15b3",
                "0x101b",
                "0x020700",
                numa=numa,
                driver="mlx5_core",
            )
            gpu = FakeGpu(
                uuid=f"GPU-{rand_uuid(rng)}",
                pci_bus_id=nvml_bus(gpu_bus),
                name="NVIDIA A100-SXM4-80GB",
                serial=_serial(rng, "13243210"),
                board_part_number="692-2G506-0210-002",
                architecture="Ampere",
                compute_capability=(8, 0),
                memory_total_bytes=81920 * MIB,
                power_limit_mw=400000,
                vbios_version="92.00.36.00.02",
                cpu_affinity=machine.node_cpus(numa),
                nvlinks=[
                    NvLinkInfo(link, True, nvml_bus(switches[link // 2]), "switch")
                    for link in range(12)
                ],
            )
            if index < len(layouts):
                gpu.mig_mode = (True, True)
                gpu.mig_devices = layouts[index]
            elif index == 4:
                gpu.mig_mode = (False, True)
            machine.gpus.append(gpu)
            nics.append(
                FakeNic(
                    name=f"mlx5_{index}",
                    netdev=f"ibp{base_bus + 3}s0",
                    pci_bus_id=nic_bus,
                    kind="infiniband",
                    mac=_ipoib_address(rng),
                    speed_mbps=200000,
                    rdma=True,
                    addresses=[f"192.168.{index}.{number % 250 + 1}/24"],
                )
            )
            index += 1
    machine.nics = nics
    for nic in nics:
        if nic.rdma:
            nic.node_guid, nic.lid = _guid(rng), _lid(rng)
    machine.disks = _nvme_drives(tree, rng, os_root=0x60, data=((0x70, 0, 4),))
    return machine


def l40s(rng: random.Random, hostname: str, number: int = 1) -> FakeMachine:
    """4x L40S on PCIe: GPUs 0 and 1 behind one switch with a ConnectX-6 Dx (PIX), GPU 2 on
    another host bridge of socket 0 (NODE), GPU 3 on socket 1 (SYS). Persistence mode off."""
    machine = _base(
        rng,
        "l40s",
        hostname,
        vendor="Supermicro",
        product="AS -4125GS-TNRT",
        serial=_serial(rng, "S5", 12),
        cpu_model="AMD EPYC 9354 32-Core Processor",
        cores_per_socket=32,
        memory_bytes=768 * 1024**3,
        driver_version="550.90.07",
        cuda_version="12.4",
        nvml_version="12.550.90.07",
        kernel="6.8.0-45-generic",
        os_name="Ubuntu 24.04.1 LTS",
    )
    tree = _Tree(machine)
    nics = [_mgmt_nic(tree, rng, number)]
    down = tree.switch(tree.root_port(0x40, 0), 0x41, 3, 0)
    gpu_buses = [
        tree.add(down[0], "0000:43:00.0", "0x10de", "0x26b9", "0x030200", numa=0, driver="nvidia"),
        tree.add(down[1], "0000:44:00.0", "0x10de", "0x26b9", "0x030200", numa=0, driver="nvidia"),
    ]
    nic0 = tree.add(
        down[2], "0000:45:00.0", "0x15b3", "0x101d", "0x020000", numa=0, driver="mlx5_core"
    )
    gpu_buses.append(
        tree.add(
            tree.root_port(0x20, 0),
            "0000:21:00.0",
            "0x10de",
            "0x26b9",
            "0x030200",
            numa=0,
            driver="nvidia",
        )
    )
    gpu_buses.append(
        tree.add(
            tree.root_port(0xC0, 1),
            "0000:c1:00.0",
            "0x10de",
            "0x26b9",
            "0x030200",
            numa=1,
            driver="nvidia",
        )
    )
    nic1 = tree.add(
        tree.root_port(0xE0, 1),
        "0000:e1:00.0",
        "0x15b3",
        "0x101d",
        "0x020000",
        numa=1,
        driver="mlx5_core",
    )
    for bus in gpu_buses:
        numa = 1 if bus.startswith("0000:c") else 0
        machine.gpus.append(
            FakeGpu(
                uuid=f"GPU-{rand_uuid(rng)}",
                pci_bus_id=nvml_bus(bus),
                name="NVIDIA L40S",
                serial=_serial(rng, "13245230"),
                board_part_number="900-2G133-0080-000",
                architecture="Ada Lovelace",
                compute_capability=(8, 9),
                memory_total_bytes=46068 * MIB,
                power_limit_mw=350000,
                vbios_version="95.02.66.00.02",
                cpu_affinity=machine.node_cpus(numa),
                persistence_mode=False,
                mig_mode=None,
                retired_pages=0,
                retired_pages_pending=False,
                remapped_rows=None,
                unsupported=frozenset({"numa_node", "mig_mode", "remapped_rows", "nvlinks"}),
            )
        )
    for name, bus, netdev in (("mlx5_0", nic0, "ens1f0np0"), ("mlx5_1", nic1, "ens2f0np0")):
        nics.append(
            FakeNic(
                name=name,
                netdev=netdev,
                pci_bus_id=bus,
                kind="ethernet",
                mac=_mac(rng, "94:6d:ae"),
                speed_mbps=100000,
                rdma=True,
                addresses=[f"10.50.{number // 200}.{number % 200 + 20}/16"],
            )
        )
    machine.nics = nics
    return machine


def cpu_only(rng: random.Random, hostname: str, number: int = 1) -> FakeMachine:
    """A login node: no NVIDIA driver, so NVML's library is missing."""
    machine = _base(
        rng,
        "cpu-only",
        hostname,
        vendor="Dell Inc.",
        product="PowerEdge R650",
        serial="".join(rng.choice("0123456789BCDFGHJKLMNPQRSTVWXYZ") for _ in range(7)),
        cpu_model="Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz",
        cores_per_socket=32,
        memory_bytes=512 * 1024**3,
        kernel="5.15.0-119-generic",
        os_name="Ubuntu 22.04.5 LTS",
        driver_version=None,
        cuda_version=None,
        nvml_version=None,
        nvml_error="NVML Shared Library Not Found (is the NVIDIA driver installed?)",
    )
    tree = _Tree(machine)
    port = tree.root_port(0x30, 0)
    nics = []
    for fn, name in enumerate(("eno1np0", "eno2np1")):
        bus = tree.add(
            port, f"0000:31:00.{fn}", "0x14e4", "0x16d7", "0x020000", numa=0, driver="bnxt_en"
        )
        nics.append(
            FakeNic(
                name=name,
                netdev=name,
                pci_bus_id=bus,
                mac=_mac(rng, "b0:26:28"),
                speed_mbps=25000,
                addresses=[f"10.40.9.{number % 200 + 20}/16"] if fn == 0 else [],
            )
        )
    machine.nics = nics
    return machine


def _h100_pcie(rng: random.Random, bus: str, cpus: list[int]) -> FakeGpu:
    return FakeGpu(
        uuid=f"GPU-{rand_uuid(rng)}",
        pci_bus_id=nvml_bus(bus),
        name="NVIDIA H100 PCIe",
        serial=_serial(rng, "13212230"),
        board_part_number="900-21010-0000-000",
        architecture="Hopper",
        compute_capability=(9, 0),
        memory_total_bytes=81559 * MIB,
        power_limit_mw=350000,
        vbios_version="96.00.30.00.01",
        cpu_affinity=cpus,
        unsupported=frozenset({"numa_node", "nvlinks"}),
    )


def kvm_host(
    rng: random.Random, hostname: str, number: int = 1, guests: list[tuple[str, str]] | None = None
) -> FakeMachine:
    """A KVM host: 4x H100 PCIe bound to vfio-pci (passed through), no NVIDIA driver loaded,
    two libvirt guests. `guests` gives (uuid, name) pairs; random ones otherwise."""
    machine = _base(
        rng,
        "kvm-host",
        hostname,
        vendor="Dell Inc.",
        product="PowerEdge R750xa",
        serial="".join(rng.choice("0123456789BCDFGHJKLMNPQRSTVWXYZ") for _ in range(7)),
        cpu_model="Intel(R) Xeon(R) Gold 6348 CPU @ 2.60GHz",
        cores_per_socket=28,
        memory_bytes=1024**4,
        kernel="5.14.0-427.13.1.el9_4.x86_64",
        os_name="Rocky Linux 9.4 (Blue Onyx)",
        driver_version=None,
        cuda_version=None,
        nvml_version=None,
        nvml_error="Driver Not Loaded (is the nvidia kernel module loaded?)",
    )
    tree = _Tree(machine)
    nics = [_mgmt_nic(tree, rng, number)]
    for root, numa in ((0x17, 0), (0x31, 0), (0xB1, 1), (0xCA, 1)):
        tree.add(
            tree.root_port(root - 1, numa),
            f"0000:{root:02x}:00.0",
            "0x10de",
            "0x2331",
            "0x030200",
            numa=numa,
            driver="vfio-pci",
        )
    nic_port = tree.root_port(0x4A, 0)
    for fn in range(2):
        bus = tree.add(
            nic_port, f"0000:4b:00.{fn}", "0x15b3", "0x101d", "0x020000", numa=0, driver="mlx5_core"
        )
        nics.append(
            FakeNic(
                name=f"mlx5_{fn}",
                netdev=f"ens3f{fn}np{fn}",
                pci_bus_id=bus,
                mac=_mac(rng, "94:6d:ae"),
                speed_mbps=100000,
                rdma=True,
                addresses=[f"10.60.0.{number % 200 + 20}/16"] if fn == 0 else [],
            )
        )
    machine.nics = nics
    pairs = guests or [(rand_uuid(rng), f"gpu-vm-{k:02d}") for k in (1, 2)]
    machine.guests = [(uuid, name, True) for uuid, name in pairs]
    return machine


def kvm_vm(
    rng: random.Random, hostname: str, number: int = 1, system_uuid: str | None = None
) -> FakeMachine:
    """A KVM guest with two passed-through H100 PCIe; `system_uuid` is its libvirt domain UUID."""
    machine = _base(
        rng,
        "kvm-vm",
        hostname,
        vendor="QEMU",
        product="Standard PC (Q35 + ICH9, 2009)",
        serial=None,
        cpu_model="Intel Xeon Processor (Icelake)",
        sockets=1,
        cores_per_socket=32,
        threads_per_core=1,
        numa_nodes=1,
        memory_bytes=256 * 1024**3,
        virtualization="kvm",
        kernel="5.15.0-119-generic",
        os_name="Ubuntu 22.04.5 LTS",
        driver_version="550.90.07",
        cuda_version="12.4",
        nvml_version="12.550.90.07",
    )
    if system_uuid:
        machine.system_uuid = system_uuid
    tree = _Tree(machine)
    for slot, bus in ((2, 0x06), (3, 0x07)):
        port = tree.add("pci0000:00", f"0000:00:{slot:02x}.0", "0x1b36", "0x000c", numa=-1)
        pci = tree.add(
            port, f"0000:{bus:02x}:00.0", "0x10de", "0x2331", "0x030200", numa=-1, driver="nvidia"
        )
        machine.gpus.append(_h100_pcie(rng, pci, list(range(32))))
    port = tree.add("pci0000:00", "0000:00:01.0", "0x1b36", "0x000c", numa=-1)
    nic = tree.add(
        port, "0000:01:00.0", "0x1af4", "0x1041", "0x020000", numa=-1, driver="virtio-pci"
    )
    machine.nics = [
        FakeNic(
            name="enp1s0",
            netdev="enp1s0",
            pci_bus_id=nic,
            mac=_mac(rng, "52:54:00"),
            speed_mbps=None,
            device_subdir="virtio0",
            addresses=[f"10.70.0.{number % 200 + 20}/16"],
        )
    ]
    return machine


NVL72_TRAYS = 18  # compute trays per NVL72 rack: one NVLink fabric, one clique


def gb200(rng: random.Random, hostname: str, number: int = 1) -> FakeMachine:
    """A GB200 NVL72 compute tray: 2 Grace (72 Arm cores each), 4 B200-class GPUs on
    NVLink 5 to the rack's NVSwitch trays, 4 ConnectX-7 NDR, NVMe E1.S drives.

    Trays 1-18 share one NVLink fabric (cluster UUID and clique 1), trays 19-36 the next:
    the fabric manager registers every GPU of a rack in one domain.
    """
    machine = _base(
        rng,
        "gb200",
        hostname,
        vendor="NVIDIA",
        product="GB200 NVL72 1RU Compute Tray",
        serial=_serial(rng, "1790124"),
        cpu_model="Neoverse-V2",
        cores_per_socket=72,
        threads_per_core=1,
        memory_bytes=960 * 1024**3,
        driver_version="570.124.06",
        cuda_version="12.8",
        nvml_version="12.570.124.06",
        kernel="6.8.0-1013-nvidia-64k",
        os_name="Ubuntu 24.04.2 LTS",
    )
    domain = (number - 1) // NVL72_TRAYS
    cluster_uuid = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"nvl72-domain-{domain}"))
    tree = _Tree(machine)
    nics = [_mgmt_nic(tree, rng, number)]
    for i in range(4):
        numa = i // 2
        root = 0x10 + 0x20 * i
        gpu_pci = tree.add(
            tree.root_port(root, numa),
            f"0000:{root + 1:02x}:00.0",
            "0x10de",
            "0x2941",
            "0x030200",
            numa=numa,
            driver="nvidia",
        )
        nic_pci = tree.add(
            tree.root_port(root + 8, numa),
            f"0000:{root + 9:02x}:00.0",
            "0x15b3",
            "0x1021",
            "0x020700",
            numa=numa,
            driver="mlx5_core",
        )
        machine.gpus.append(
            FakeGpu(
                uuid=f"GPU-{rand_uuid(rng)}",
                pci_bus_id=nvml_bus(gpu_pci),
                name="NVIDIA GB200",
                serial=_serial(rng, "1654124"),
                board_part_number="699-2G548-1200-000",
                architecture="Blackwell",
                compute_capability=(10, 0),
                memory_total_bytes=189471 * MIB,
                power_limit_mw=1200000,
                vbios_version="97.00.82.00.3A",
                cpu_affinity=machine.node_cpus(numa),
                # the NVSwitches sit in switch trays: NVML names no PCI address for them
                nvlinks=[NvLinkInfo(link, True, None, "switch") for link in range(18)],
                fabric=GpuFabricInfo(cluster_uuid, 1, "completed", "Success"),
                unsupported=frozenset(),
            )
        )
        nics.append(
            FakeNic(
                name=f"mlx5_{i}",
                netdev=f"ibp{root + 9}s0",
                pci_bus_id=nic_pci,
                kind="infiniband",
                mac=_ipoib_address(rng),
                speed_mbps=400000,
                rdma=True,
                node_guid=_guid(rng),
                lid=_lid(rng),
                addresses=[f"192.168.{i}.{number % 250 + 1}/24"],
            )
        )
    machine.nics = nics
    machine.disks = _nvme_drives(tree, rng, os_root=0xB0, data=((0xC0, 0, 2), (0xD0, 1, 2)))
    return machine


Builder = Callable[..., FakeMachine]

PROFILES: dict[str, Builder] = {
    "h100": h100,
    "h100-lost": h100_lost,
    "h100-gpu-error": h100_gpu_error,
    "a100-mig": a100_mig,
    "l40s": l40s,
    "cpu-only": cpu_only,
    "kvm-host": kvm_host,
    "kvm-vm": kvm_vm,
    "gb200": gb200,
}


def build(
    profile: str, *, seed: int | str = 0, hostname: str | None = None, number: int = 1
) -> FakeMachine:
    """One machine of a profile, reproducible from the seed."""
    if profile not in PROFILES:
        raise KeyError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    rng = random.Random(f"{seed}:{profile}:{number}")
    return PROFILES[profile](rng, hostname or f"{profile}-{number:02d}", number)
