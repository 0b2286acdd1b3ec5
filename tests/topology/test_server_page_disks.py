"""The server page's disk card: model, serial, capacity, PCIe link and NUMA node of each
local disk the agent reported, escaped; a server without disks says so."""

from __future__ import annotations

import pytest

from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def disk(name: str, model: str, serial: str, **extra) -> dict:
    return {
        "name": name,
        "model": model,
        "serial": serial,
        "size_bytes": 3840755982336,
        "rotational": False,
        "transport": "nvme",
        "pci_bus_id": "0000:61:00.0",
        "pcie_link_speed": "16.0 GT/s",
        "pcie_link_width": 4,
        "numa_node": 1,
        **extra,
    }


def test_the_server_page_lists_each_disk_with_its_pcie_link_and_numa_node(client, user):
    with_disks = make_report("st-01", gpus=2)
    with_disks["disks"] = [
        disk("nvme0n1", "SAMSUNG MZWLR3T8HCLS-00A07", "S6A"),
        disk("sda", "<img src=x onerror=alert(1)>", "Z1", transport="sata", pcie_link_speed="")
        | {"pcie_link_width": None, "numa_node": None, "rotational": True},
    ]
    servers = apply_reports(with_disks, make_report("st-02", gpus=2))
    client.force_login(user)
    text = client.get(f"/servers/{servers['st-01'].pk}/").content.decode()
    card = text.split('id="disk-table"')[1].split("</table>")[0]
    rows = card.split("<tr>")[2:]
    assert "nvme0n1" in rows[0] and "SAMSUNG MZWLR3T8HCLS-00A07" in rows[0] and "S6A" in rows[0]
    assert "3.5 TiB" in rows[0] and "16.0 GT/s x4" in rows[0] and "<td>1</td>" in rows[0]
    assert "&lt;img src=x onerror=alert(1)&gt;" in rows[1] and "(rotational)" in rows[1]
    assert "<img src=x" not in text
    empty = client.get(f"/servers/{servers['st-02'].pk}/").content.decode()
    assert "No local disks reported." in empty.split('id="disk-table"')[1].split("</table>")[0]
