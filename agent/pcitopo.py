"""PCIe path classification: the link class between two PCI devices, as `nvidia-smi topo -m`.

NVML answers the class of a GPU pair itself (nvmlDeviceGetTopologyCommonAncestor) but knows
nothing of NICs, so GPU-to-NIC and NIC-to-NIC affinity come from the devices' paths in sysfs:
`/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0` is the chain of
bridges from the host bridge `pci0000:15` down to the device. The classes, closest first:

- PIX: both sit below one PCIe switch (at most one switch between them);
- PXB: below the same root port, through more than one switch level;
- PHB: same host bridge (root complex), no shared switch;
- NODE: different host bridges of one NUMA node;
- SYS: across NUMA nodes (the inter-socket link).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

BDF_RE = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
ROOT_RE = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")


def pci_path_from_sysfs(real_path: str) -> list[str]:
    """`/sys/devices/pci0000:15/0000:15:01.0/.../0000:19:00.0/net/eth0` -> [pci0000:15, ...].

    Keeps the host bridge and every PCI function down to the deepest one; virtio or net
    children below the function are dropped. [] when the path is not under a PCI root.
    """
    parts = real_path.lower().split("/")
    chain: list[str] = []
    for part in parts:
        if ROOT_RE.match(part):
            chain = [part]
        elif chain and BDF_RE.match(part):
            chain.append(part)
    return chain if len(chain) >= 2 else []


def classify_pci_paths(
    path_a: Sequence[str],
    path_b: Sequence[str],
    numa_a: int | None = None,
    numa_b: int | None = None,
) -> str | None:
    """The link class between two devices from their PCI paths (see the module docstring).

    A NUMA node of None or -1 means "the kernel has no NUMA information" (single-socket
    machines, many VMs); two such devices on different host bridges are NODE, not SYS.
    """
    if len(path_a) < 2 or len(path_b) < 2:
        return None
    if path_a[0] != path_b[0]:
        node_a = -1 if numa_a is None else numa_a
        node_b = -1 if numa_b is None else numa_b
        return "NODE" if node_a == node_b else "SYS"
    below_a, below_b = list(path_a[1:]), list(path_b[1:])
    common = 0
    for left, right in zip(below_a, below_b, strict=False):
        if left != right:
            break
        common += 1
    if common == 0:
        return "PHB"
    # Below the deepest shared bridge: a downstream port and the device itself is one switch.
    deepest = max(len(below_a) - common, len(below_b) - common)
    return "PIX" if deepest <= 2 else "PXB"
