"""Host facts from /sys, /proc and /etc: identity, CPUs, memory, NICs, PCI functions, VMs.

Everything is read below an injectable root (`SysHost(root=tmp_path)`), and the few facts
that only a command gives (IP addresses, `systemd-detect-virt`, `virsh`) go through an
injectable runner, so tests and the fleet simulator use fake trees instead of this machine.
No fact is allowed to fail the report: a missing or unreadable file is a null field.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .pcitopo import pci_path_from_sysfs
from .schema import normalize_pci_bus_id
from .sources.disks import read_disks
from .sources.lldp import COMMAND as LLDP_COMMAND
from .sources.lldp import parse_lldp_neighbors

Runner = Callable[[Sequence[str]], "str | None"]

NVIDIA_VENDOR = "0x10de"
DISPLAY_CLASS_PREFIX = "0x03"  # 0x0300 VGA, 0x0302 3D controller
# Values firmware vendors leave in SMBIOS fields; they identify nothing.
PLACEHOLDER_UUIDS = {
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "03000200-0400-0500-0006-000700080009",
}
PLACEHOLDER_STRINGS = {
    "",
    "to be filled by o.e.m.",
    "default string",
    "system serial number",
    "system product name",
    "system manufacturer",
    "not specified",
    "not applicable",
    "none",
    "0",
    "0123456789",
    "n/a",
}
_DMI_HYPERVISORS = (
    ("qemu", "kvm"),
    ("kvm", "kvm"),
    ("openstack", "kvm"),
    ("vmware", "vmware"),
    ("virtualbox", "oracle"),
    ("innotek", "oracle"),
    ("xen", "xen"),
    ("amazon ec2", "amazon"),
    ("google compute engine", "google"),
    ("microsoft corporation virtual machine", "microsoft"),
)
_IP_LINE = re.compile(r"^\d+:\s+(?P<ifname>[^\s:@]+)(?:@\S+)?\s+(?P<family>inet6?)\s+(?P<addr>\S+)")


def run_command(argv: Sequence[str], timeout: float = 5.0) -> str | None:
    """Run a command; its stdout, or None when absent, failing or slow (never raises)."""
    if not shutil.which(argv[0]):
        return None
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


@dataclass(frozen=True)
class PciFunction:
    """An NVIDIA display/3D function on the PCI bus, with the driver bound to it."""

    pci_bus_id: str
    device_id: str | None
    driver: str | None
    numa_node: int | None


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if value.lower() in PLACEHOLDER_STRINGS else value


def _int(value: str | None) -> int | None:
    try:
        return int(value.strip()) if value is not None else None
    except ValueError:
        return None


def parse_ib_rate_mbps(rate: str | None) -> int | None:
    """'400 Gb/sec (4X NDR)' -> 400000 (Mbit/s, as the report counts speed)."""
    if not rate:
        return None
    match = re.match(r"\s*([\d.]+)\s*Gb/sec", rate)
    return int(float(match.group(1)) * 1000) if match else None


def parse_ip_addr(output: str | None) -> dict[str, list[str]]:
    """`ip -o addr show` -> {ifname: [addr/prefix, ...]}: stable global addresses only."""
    found: dict[str, list[str]] = {}
    for line in (output or "").splitlines():
        match = _IP_LINE.match(line)
        # loopback and link-local say nothing about the server; privacy addresses rotate
        if not match or any(k in line for k in (" scope host", " scope link", " temporary")):
            continue
        found.setdefault(match["ifname"], []).append(match["addr"])
    return found


class SysHost:
    """The facts of the machine whose root filesystem is at `root` (the live one by default).

    `hostname` overrides the kernel's (a report built from another server's saved output).
    """

    def __init__(
        self,
        root: str | os.PathLike[str] = "/",
        *,
        run: Runner | None = None,
        hostname: str | None = None,
    ) -> None:
        self.root = Path(root)
        self.is_live = self.root.resolve() == Path("/")
        self._run = run if run is not None else (run_command if self.is_live else _no_commands)
        self._hostname = hostname
        self._addresses: dict[str, list[str]] | None = None
        self.warnings: list[str] = []

    # file access below the root

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def read(self, rel: str) -> str | None:
        try:
            return self.path(rel).read_text("utf-8", "replace").strip()
        except (OSError, ValueError):
            return None

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(rel)))
        except OSError:
            return []

    def realpath(self, rel: str) -> str | None:
        target = self.path(rel)
        if not target.exists():
            return None
        real = os.path.realpath(target)
        root = os.path.realpath(self.root)
        return real[len(root) :] if root != "/" and real.startswith(root) else real

    # identity and platform

    def facts(self) -> dict[str, Any]:
        """The report's `host` object; warnings about it land in `self.warnings`."""
        self.warnings = []
        hostname = self.hostname()
        facts: dict[str, Any] = {
            "system_uuid": self.system_uuid(),
            "machine_id": _clean(self.read("etc/machine-id")),
            "hostname": hostname,
            "fqdn": self.fqdn(hostname),
            "vendor": _clean(self.read("sys/class/dmi/id/sys_vendor")),
            "product": _clean(self.read("sys/class/dmi/id/product_name")),
            "serial": _clean(self.read("sys/class/dmi/id/product_serial")),
        }
        facts.update(self.cpu())
        facts["memory_total_bytes"] = self.memory_total_bytes()
        facts["numa_nodes"] = self.numa_nodes()
        facts["os_name"] = self.os_name()
        facts["kernel"] = self.read("proc/sys/kernel/osrelease")
        facts["addresses"] = sorted(
            {addr for name, addrs in self.addresses().items() if name != "lo" for addr in addrs}
        )
        facts["virtualization"] = self.virtualization()
        guests = self.guests()
        if guests is not None:
            facts["guests"] = guests
        return facts

    def system_uuid(self) -> str | None:
        value = self.read("sys/class/dmi/id/product_uuid")
        if not value:
            return None
        value = value.lower()
        if value in PLACEHOLDER_UUIDS:
            self.warnings.append(
                f"SMBIOS system UUID {value} is a firmware placeholder shared by many machines; "
                "the backend identifies this server by machine-id instead"
            )
            return None
        return value

    def hostname(self) -> str:
        if self._hostname:
            return self._hostname
        name = self.read("proc/sys/kernel/hostname")
        if not name and self.is_live:
            name = socket.gethostname()
        return name or "localhost"

    def fqdn(self, hostname: str) -> str | None:
        if "." in hostname:
            return hostname
        if self.is_live and not self._hostname:
            name = socket.getfqdn(hostname)
            return name if "." in name and not name.startswith("localhost") else None
        domain = self.read("proc/sys/kernel/domainname")
        if domain and domain != "(none)":
            return f"{hostname}.{domain}"
        return None

    def cpu(self) -> dict[str, Any]:
        """Model, sockets, physical cores and logical CPUs from /proc/cpuinfo (sysfs as backup)."""
        text = self.read("proc/cpuinfo") or ""
        model = None
        threads = 0
        packages: set[str] = set()
        cores: set[tuple[str, str]] = set()
        current: dict[str, str] = {}
        for block in text.split("\n\n"):
            current = {}
            for line in block.splitlines():
                key, sep, value = line.partition(":")
                if sep:
                    current[key.strip().lower()] = value.strip()
            if "processor" not in current:
                continue
            threads += 1
            model = model or current.get("model name") or current.get("cpu model")
            if "physical id" in current:
                packages.add(current["physical id"])
                cores.add((current["physical id"], current.get("core id", "")))
        if not packages:  # Arm and many VMs: the kernel's topology files
            for cpu in self.listdir("sys/devices/system/cpu"):
                if not re.fullmatch(r"cpu\d+", cpu):
                    continue
                package = self.read(f"sys/devices/system/cpu/{cpu}/topology/physical_package_id")
                core = self.read(f"sys/devices/system/cpu/{cpu}/topology/core_id")
                if package is not None:
                    packages.add(package)
                    cores.add((package, core or cpu))
        return {
            "cpu_model": model,
            "cpu_sockets": len(packages) or (1 if threads else None),
            "cpu_cores": len(cores) or (threads or None),
            "cpu_threads": threads or None,
        }

    def memory_total_bytes(self) -> int | None:
        for line in (self.read("proc/meminfo") or "").splitlines():
            if line.startswith("MemTotal:"):
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    return int(parts[1]) * 1024
        return None

    def numa_nodes(self) -> int | None:
        nodes = [n for n in self.listdir("sys/devices/system/node") if re.fullmatch(r"node\d+", n)]
        return len(nodes) or None

    def os_name(self) -> str | None:
        text = self.read("etc/os-release") or self.read("usr/lib/os-release")
        if not text:
            return None
        values: dict[str, str] = {}
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip()] = value.strip().strip('"').strip("'")
        return values.get("PRETTY_NAME") or (
            " ".join(v for v in (values.get("NAME"), values.get("VERSION")) if v) or None
        )

    def addresses(self) -> dict[str, list[str]]:
        if self._addresses is None:
            self._addresses = parse_ip_addr(self._run(["ip", "-o", "addr", "show"]))
        return self._addresses

    def virtualization(self) -> dict[str, Any]:
        """Is this a VM, and on which hypervisor: systemd-detect-virt, else DMI and cpuinfo."""
        detected = self._run(["systemd-detect-virt", "--vm"])
        if detected is not None and detected.strip():
            name = detected.strip()
            return {"is_virtual": name != "none", "hypervisor": None if name == "none" else name}
        dmi = " ".join(
            filter(
                None,
                (
                    self.read("sys/class/dmi/id/sys_vendor"),
                    self.read("sys/class/dmi/id/product_name"),
                ),
            )
        ).lower()
        for needle, hypervisor in _DMI_HYPERVISORS:
            if needle in dmi:
                return {"is_virtual": True, "hypervisor": hypervisor}
        flags = next(
            (
                line
                for line in (self.read("proc/cpuinfo") or "").splitlines()
                if line.startswith("flags")
            ),
            "",
        )
        if " hypervisor" in flags:
            return {"is_virtual": True, "hypervisor": None}
        return {"is_virtual": False, "hypervisor": None}

    def guests(self) -> list[dict[str, Any]] | None:
        """libvirt domains of this host; None when this is no libvirt host (or unreadable).

        Persistent domains are the XML files in /etc/libvirt/qemu, running ones (transient
        ones too) have a status file in /run/libvirt/qemu; each names the guest and its UUID,
        which is the guest's SMBIOS system UUID. Without readable files, `virsh` answers.
        """
        config, status = "etc/libvirt/qemu", "run/libvirt/qemu"
        readable = [
            folder
            for folder in (config, status)
            if self.path(folder).is_dir() and os.access(self.path(folder), os.R_OK | os.X_OK)
        ]
        if not readable:
            return self._virsh_guests()
        guests: dict[str, dict[str, Any]] = {}
        for folder in (status, config):  # running first: a status file is the fresher truth
            for filename in self.listdir(folder) if folder in readable else []:
                if not filename.endswith(".xml"):
                    continue
                try:
                    data = self.path(f"{folder}/{filename}").read_bytes()
                    root = ET.fromstring(data)  # noqa: S314 - libvirt's own root-owned files
                except (OSError, ET.ParseError):
                    continue
                domain = root.find("domain") if root.tag == "domstatus" else root
                if domain is None:
                    continue
                uuid = (domain.findtext("uuid") or "").strip().lower()
                name = (domain.findtext("name") or "").strip() or None
                if not uuid or uuid in guests:
                    continue
                running = folder == status or (
                    name is not None and self.path(f"{status}/{name}.pid").exists()
                )
                guests[uuid] = {
                    "uuid": uuid,
                    "name": name,
                    "state": "running" if running else "shut off",
                }
        return [guests[key] for key in sorted(guests)]

    def _virsh_guests(self) -> list[dict[str, Any]] | None:
        listed = self._run(["virsh", "-c", "qemu:///system", "list", "--all", "--uuid"])
        if listed is None:
            return None
        uuids = sorted({line.strip().lower() for line in listed.splitlines() if line.strip()})
        return [{"uuid": uuid, "name": None, "state": None} for uuid in uuids]

    # PCI

    def pci_path(self, bus_id: str | None) -> list[str]:
        """The chain of bridges from the host bridge down to a PCI function; [] if unknown."""
        bus = normalize_pci_bus_id(bus_id)
        if not bus:
            return []
        real = self.realpath(f"sys/bus/pci/devices/{bus}")
        return pci_path_from_sysfs(real) if real else []

    def pci_numa_node(self, bus_id: str | None) -> int | None:
        bus = normalize_pci_bus_id(bus_id)
        return _int(self.read(f"sys/bus/pci/devices/{bus}/numa_node")) if bus else None

    def pci_local_cpus(self, bus_id: str | None) -> str | None:
        """The CPUs nearest a PCI function (`local_cpulist`, e.g. "0-55,112-167")."""
        bus = normalize_pci_bus_id(bus_id)
        return _clean(self.read(f"sys/bus/pci/devices/{bus}/local_cpulist")) if bus else None

    def nvidia_pci_functions(self) -> list[PciFunction]:
        """NVIDIA display/3D controllers on the bus, whatever driver (or none) holds them."""
        found: list[PciFunction] = []
        for entry in self.listdir("sys/bus/pci/devices"):
            base = f"sys/bus/pci/devices/{entry}"
            if (self.read(f"{base}/vendor") or "").lower() != NVIDIA_VENDOR:
                continue
            if not (self.read(f"{base}/class") or "").lower().startswith(DISPLAY_CLASS_PREFIX):
                continue
            driver = self.realpath(f"{base}/driver")
            bus = normalize_pci_bus_id(entry)
            if bus is None:
                continue
            found.append(
                PciFunction(
                    pci_bus_id=bus,
                    device_id=self.read(f"{base}/device"),
                    driver=os.path.basename(driver) if driver else None,
                    numa_node=_int(self.read(f"{base}/numa_node")),
                )
            )
        return found

    # storage

    def disks(self) -> list[dict[str, Any]]:
        """Local disks (NVMe, SATA, SAS) from /sys/block; see `agent.sources.disks`."""
        return read_disks(self)

    # NICs

    def nics(self) -> list[dict[str, Any]]:
        """Physical NICs: RDMA devices under /sys/class/infiniband (named mlx5_0, with their
        netdev), then every other netdev backed by a device; SR-IOV virtual functions are
        left out. Sorted by name."""
        nics: dict[str, dict[str, Any]] = {}
        covered: set[str] = set()
        addresses = self.addresses()
        for name in self.listdir("sys/class/infiniband"):
            base = f"sys/class/infiniband/{name}"
            if self.path(f"{base}/device/physfn").exists():
                continue  # an SR-IOV virtual function: belongs to a VM, not an adapter
            netdevs = self.listdir(f"{base}/device/net")
            netdev = netdevs[0] if netdevs else None
            covered.update(netdevs)
            ports = self.listdir(f"{base}/ports") or ["1"]
            port = f"{base}/ports/{ports[0]}"
            layer = (self.read(f"{port}/link_layer") or "").lower()
            bus = self._device_bus(f"{base}/device")
            state = self.read(f"{port}/state")
            nics[name] = {
                "name": name,
                "netdev": netdev,
                "kind": "infiniband" if layer == "infiniband" else "ethernet",
                "mac": (self.read(f"sys/class/net/{netdev}/address") if netdev else None)
                or self.read(f"{base}/node_guid"),
                "pci_bus_id": bus,
                "numa_node": self.pci_numa_node(bus),
                "speed_mbps": parse_ib_rate_mbps(self.read(f"{port}/rate")),
                "state": _ib_state(state),
                "addresses": sorted(addresses.get(netdev, [])) if netdev else [],
                **self.infiniband(base, ports),
            }
        for name in self.listdir("sys/class/net"):
            base = f"sys/class/net/{name}"
            if name in covered or name in nics or not self.path(f"{base}/device").exists():
                continue  # virtual interfaces (bridges, bonds, veth) have no device
            if self.path(f"{base}/device/physfn").exists():
                continue  # SR-IOV virtual functions: dozens per port, none an adapter
            bus = self._device_bus(f"{base}/device")
            speed = _int(self.read(f"{base}/speed"))
            nics[name] = {
                "name": name,
                "netdev": name,
                "kind": "infiniband" if self.read(f"{base}/type") == "32" else "ethernet",
                "mac": self.read(f"{base}/address"),
                "pci_bus_id": bus,
                "numa_node": self.pci_numa_node(bus),
                "speed_mbps": speed if speed and speed > 0 else None,
                "state": self.read(f"{base}/operstate"),
                "addresses": sorted(addresses.get(name, [])),
            }
        neighbors = self.lldp_neighbors()
        for nic in nics.values():
            if nic["netdev"] in neighbors:
                nic["lldp_neighbors"] = neighbors[nic["netdev"]]
        return [nics[key] for key in sorted(nics)]

    def lldp_neighbors(self) -> dict[str, list[dict[str, Any]]]:
        """Neighbours per netdev from lldpd, when it runs ({} otherwise), in a stable order."""
        found = parse_lldp_neighbors(self._run(list(LLDP_COMMAND)))
        return {
            name: sorted(listed, key=lambda n: (n["system_name"] or "", n["port_id"] or ""))
            for name, listed in found.items()
        }

    def infiniband(self, base: str, ports: list[str]) -> dict[str, Any]:
        """An RDMA device's fabric identity: node GUID and its first port's GUID, LID, rate,
        physical state and link layer, plus every port's GUID (the fabric binds adapters to
        servers by these). GUIDs are 16 lower-case hex digits, as ibnetdiscover prints them;
        the port GUID is the interface half of GID 0, on an InfiniBand port only (a RoCE
        port's GID comes from its MAC or IP address and names no fabric port)."""
        port = f"{base}/ports/{ports[0]}"
        layer = self.read(f"{port}/link_layer")
        guids = [
            guid
            for number in ports
            if (guid := self._port_guid(f"{base}/ports/{number}")) is not None
        ]
        return {
            "node_guid": parse_guid(self.read(f"{base}/node_guid")),
            "port_number": _int(ports[0]),
            "port_guid": self._port_guid(port),
            "port_guids": guids,
            "lid": parse_lid(self.read(f"{port}/lid")),
            "rate": _clean(self.read(f"{port}/rate")),
            "phys_state": _ib_phys_state(self.read(f"{port}/phys_state")),
            "link_layer": layer.lower() if layer else None,
        }

    def _port_guid(self, port: str) -> str | None:
        if (self.read(f"{port}/link_layer") or "").lower() != "infiniband":
            return None
        gid = self.read(f"{port}/gids/0")
        return parse_guid(gid.replace(":", "")[-16:]) if gid else None

    def _device_bus(self, rel: str) -> str | None:
        real = self.realpath(rel)
        chain = pci_path_from_sysfs(real) if real else []
        return chain[-1] if chain else None


def parse_guid(value: str | None) -> str | None:
    """`b83f:d203:0093:c7a2` or `0xb83fd2030093c7a2` -> `b83fd2030093c7a2`; None for an
    unset (all-zero) or malformed GUID."""
    if not value:
        return None
    digits = value.strip().lower().removeprefix("0x").replace(":", "")
    if not re.fullmatch(r"[0-9a-f]{1,16}", digits) or int(digits, 16) == 0:
        return None
    return digits.rjust(16, "0")


def parse_lid(value: str | None) -> int | None:
    """sysfs prints a LID in hex (`0x1a2`); 0 means the subnet manager assigned none."""
    try:
        lid = int(value.strip(), 16) if value else 0
    except ValueError:
        return None
    return lid if 0 < lid <= 0xFFFF else None


def _ib_phys_state(value: str | None) -> str | None:
    """'5: LinkUp' -> 'linkup', '3: Disabled' -> 'disabled', '2: Polling' -> 'polling'."""
    if not value:
        return None
    word = value.split(":", 1)[-1].strip().lower()
    return word[:32] or None


def _ib_state(value: str | None) -> str | None:
    """'4: ACTIVE' -> 'up', '1: DOWN' -> 'down', others lower-cased ('init', 'armed')."""
    if not value:
        return None
    word = value.split(":", 1)[-1].strip().lower()
    return {"active": "up", "down": "down", "polling": "down", "disabled": "down"}.get(word, word)


def _no_commands(argv: Sequence[str]) -> str | None:
    """The runner of a non-live root: commands would describe this machine, not that one."""
    return None
