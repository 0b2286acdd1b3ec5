"""One server's interconnect as `nvidia-smi topo -m` shows it: devices and a class per pair.

Pure functions over plain rows, shared by the API (`topology/servers/{id}/`), the server
page's matrix and the Plotly figures.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from inventory.choices import link_rank
from inventory.models import Server

LINK_CLASS_TEXT = {
    "NV": "NVLink: a bonded set of NVLinks (NV18 = 18 links); the fastest GPU-to-GPU path",
    "PIX": "PCIe: at most one PCIe bridge (the same PCIe switch)",
    "PXB": "PCIe: several PCIe bridges, without the host bridge",
    "PHB": "PCIe: through a PCIe host bridge (the CPU)",
    "NODE": "PCIe and the interconnect between host bridges within one NUMA node",
    "SYS": "PCIe and the SMP link between NUMA nodes (QPI/UPI/Infinity Fabric): the slowest",
}


def describe_link_class(link_class: str) -> str:
    if link_class.startswith("NV"):
        return f"NVLink x{link_class[2:]}: a bonded set of {link_class[2:]} NVLinks"
    return LINK_CLASS_TEXT.get(link_class, link_class)


def server_interconnect(server: Server) -> dict[str, Any]:
    """Devices (GPUs then NICs) and the link class of every pair, from prefetched relations.

    Expects `server` from `inventory.selectors.server_detail()` (GPUs, NICs, links prefetched).
    Lost GPUs are left out: they are not wired to anything any more.
    """
    gpus = [g for g in server.gpus.all() if g.status != "lost"]
    gpu_ids = {g.pk for g in gpus}
    devices = [
        {
            "key": f"GPU{g.index}",
            "kind": "gpu",
            "id": g.pk,
            "index": g.index,
            "name": g.name,
            "uuid": g.uuid,
            "numa_node": g.numa_node,
            "pci_bus_id": g.pci_bus_id,
            "mig_enabled": bool(g.mig_mode_current),
            "cpu_affinity": g.cpu_affinity,
        }
        for g in gpus
    ]
    devices += [
        {
            "key": n.name,
            "kind": "nic",
            "id": n.pk,
            "name": n.name,
            "netdev": n.netdev,
            "numa_node": n.numa_node,
            "pci_bus_id": n.pci_bus_id,
            "speed_mbps": n.speed_mbps,
            "nic_kind": n.kind,
        }
        for n in server.nics.all()
    ]
    links = []
    for link in server.links.all():
        # Which ends a row has is the row's check constraint (see Link); the asserts say it
        # to mypy.
        if link.gpu_a_id is None:  # two NICs (PIX: behind one PCIe switch)
            assert link.nic_a is not None and link.nic_b is not None
            links.append(
                {"a": link.nic_a.name, "b": link.nic_b.name, "link_class": link.link_class}
            )
            continue
        if link.gpu_a_id not in gpu_ids or (link.gpu_b_id and link.gpu_b_id not in gpu_ids):
            continue
        assert link.gpu_a is not None
        if link.gpu_b_id:
            assert link.gpu_b is not None
            b = f"GPU{link.gpu_b.index}"
        else:
            assert link.nic is not None
            b = link.nic.name
        links.append({"a": f"GPU{link.gpu_a.index}", "b": b, "link_class": link.link_class})
    return {
        "server": {"id": server.pk, "hostname": server.hostname},
        "devices": devices,
        "links": links,
        "nvswitch_count": server.nvswitch_count,
        "matrix": interconnect_matrix(devices, links),
        "legend": legend(link["link_class"] for link in links),
    }


def interconnect_matrix(devices: list[dict], links: list[dict]) -> list[list[str]]:
    """Rows and columns in device order; "X" on the diagonal, "" where nothing is known."""
    keys = [d["key"] for d in devices]
    position = {k: i for i, k in enumerate(keys)}
    matrix = [["" for _ in keys] for _ in keys]
    for i in range(len(keys)):
        matrix[i][i] = "X"
    for link in links:
        a, b = position.get(link["a"]), position.get(link["b"])
        if a is None or b is None:
            continue
        matrix[a][b] = matrix[b][a] = link["link_class"]
    return matrix


def legend(classes: Iterable[str]) -> list[dict[str, str]]:
    """The classes present, fastest first, each explained in plain words."""
    return [
        {"link_class": c, "description": describe_link_class(c)}
        for c in sorted(set(classes), key=link_rank)
    ]
