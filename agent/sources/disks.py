"""Local disks from /sys/block: NVMe and SATA/SAS drives, their capacity, link and NUMA node.

The seed counts storage among what a GPU server is (checkpoints and datasets are staged on
local NVMe), so each block device backed by hardware is listed: name, model, serial, size,
rotational, transport and, for NVMe, the PCIe link it trained at. Loop, RAM, zram, device
mapper and MD devices (software, not hardware), optical drives and empty slots are left out;
partitions are never listed (/sys/block holds whole devices only). A missing file is a null.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from ..pcitopo import pci_path_from_sysfs

SECTOR_BYTES = 512  # /sys/block/*/size counts 512-byte sectors whatever the logical block size
MAX_DISKS = 256  # the schema's bound
_SOFTWARE = re.compile(r"^(?:loop|ram|zram|dm-|md|sr|nbd|fd)\d*")
_NVME_PATH = re.compile(r"^nvme\d+c\d+n\d+$")  # a multipath controller path, not a disk


def _transport(name: str, real: str) -> str | None:
    """nvme, sata, sas, usb, virtio or scsi, from the name and the device's sysfs path."""
    if name.startswith("nvme"):
        return "nvme"
    path = real.lower()
    if "/usb" in path:
        return "usb"
    if "/virtio" in path:
        return "virtio"
    if re.search(r"/ata\d+/", path):
        return "sata"
    if re.search(r"/(?:port|end_device|expander)-\d+", path):
        return "sas"
    return "scsi" if "/host" in path else None


def _link_speed(value: str | None) -> str | None:
    """`16.0 GT/s PCIe` -> `16.0 GT/s`; `Unknown` (a function that negotiated nothing) -> None."""
    if not value or value.lower().startswith("unknown"):
        return None
    match = re.match(r"\s*([\d.]+\s*GT/s)", value)
    return match.group(1) if match else None


class SysFiles(Protocol):
    """What this module reads of a host (`agent.host.SysHost` is one), as paths below its root:
    named here so that host.py, which lists the disks, and this module import one way."""

    def read(self, rel: str) -> str | None: ...

    def listdir(self, rel: str) -> list[str]: ...

    def realpath(self, rel: str) -> str | None: ...

    def pci_numa_node(self, bus_id: str | None) -> int | None: ...


def read_disks(host: SysFiles) -> list[dict[str, Any]]:
    """Every hardware block device of the host under `root`, sorted by name."""
    disks: list[dict[str, Any]] = []
    for name in host.listdir("sys/block"):
        if _SOFTWARE.match(name) or _NVME_PATH.match(name):
            continue
        base = f"sys/block/{name}"
        sectors = _int(host.read(f"{base}/size"))
        if not sectors:
            continue  # an empty card reader or a slot without a medium
        real = host.realpath(base) or ""
        transport = _transport(name, real)
        # NVMe: device is the controller (nvme0) and device/device its PCI function;
        # SCSI/SATA: device is the SCSI device, its PCI function is the HBA up the path.
        device = f"{base}/device"
        pci = pci_path_from_sysfs(host.realpath(device) or real)
        bus = pci[-1] if pci else None
        link_dir = f"{device}/device" if transport == "nvme" else None
        disks.append(
            {
                "name": name,
                "model": _text(host.read(f"{device}/model"), 128),
                "serial": _text(host.read(f"{device}/serial"), 128)
                or _text(host.read(f"{device}/wwid"), 128),
                "size_bytes": sectors * SECTOR_BYTES,
                "rotational": _bool(host.read(f"{base}/queue/rotational")),
                "transport": transport,
                "pci_bus_id": bus,
                "pcie_link_speed": _link_speed(host.read(f"{link_dir}/current_link_speed"))
                if link_dir
                else None,
                "pcie_link_width": _width(host.read(f"{link_dir}/current_link_width"))
                if link_dir
                else None,
                "numa_node": host.pci_numa_node(bus) if bus else None,
            }
        )
    return disks[:MAX_DISKS]


def _text(value: str | None, limit: int) -> str | None:
    value = (value or "").strip()
    return value[:limit] or None


def _int(value: str | None) -> int | None:
    try:
        return int(value.strip()) if value else None
    except ValueError:
        return None


def _bool(value: str | None) -> bool | None:
    return {"0": False, "1": True}.get((value or "").strip())


def _width(value: str | None) -> int | None:
    width = _int(value)
    return width if width is not None and 0 < width <= 64 else None
