"""A GPU's lifecycle by serial: servers and slots it was in, replacements, its events, and the
findings its history raises, each read in a fixed number of queries."""

from __future__ import annotations

import copy
import csv
import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from findings.choices import FindingType
from health.selectors import gpu_history, health_findings
from health.services import health_sweep
from health.tables import (
    GPU_COUNTERS_TABLE,
    GPU_EVENTS_TABLE,
    GPU_PLACEMENTS_TABLE,
    GPU_REPLACEMENTS_TABLE,
)
from inventory.choices import ChangeKind
from inventory.models import Gpu

from .fleet import Agent, healthy, server_report, with_events, xid

pytestmark = pytest.mark.django_db


def now_iso() -> str:
    return timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_gpu_that_moves_servers_keeps_its_history():
    a, b = Agent("dgx-a"), Agent("dgx-b")
    report_a = server_report("dgx-a")
    moving = copy.deepcopy(report_a["gpus"][5])
    a.send(with_events(report_a, xid(48, moving["pci_bus_id"], now_iso(), uuid=moving["uuid"])))
    a.send(server_report("dgx-a", skip_gpus=(5,)))  # taken out of dgx-a
    report_b = server_report("dgx-b", gpus=2)
    moved = {**moving, "index": 2, "pci_bus_id": "0000:cb:00.0"}
    report_b["gpus"].append(moved)
    b.send(with_events(report_b, xid(79, "0000:cb:00.0", now_iso(), uuid=moving["uuid"])))
    health_sweep()

    gpu = Gpu.objects.get(uuid=moving["uuid"])
    history = gpu_history(gpu_id=gpu.pk)
    assert history["identity"] == f"serial:{moving['serial']}"
    hops = [(p["hostname"], p["pci_bus_id"]) for p in history["placements"]]
    assert hops == [("dgx-a", moving["pci_bus_id"]), ("dgx-b", "0000:cb:00.0")]
    assert history["placements"][0]["end"] is not None and history["placements"][1]["end"] is None
    assert history["placements"][1]["index"] == 2
    assert sorted((e.code, e.server.hostname) for e in history["events"]) == [
        (48, "dgx-a"),
        (79, "dgx-b"),
    ]
    kinds = {c.kind for c in history["changes"]}
    assert {ChangeKind.GPU_MOVED_IN, ChangeKind.GPU_MOVED_OUT} <= kinds
    assert [s.server.hostname for s in history["counters"]] == ["dgx-b", "dgx-a"]  # newest first


def test_a_slot_whose_gpu_is_replaced_twice():
    agent = Agent("dgx-01")
    first = server_report("dgx-01")
    agent.send(first)
    bus = first["gpus"][4]["pci_bus_id"]
    uuids = [first["gpus"][4]["uuid"]]
    report = first
    for n in (1, 2):  # the GPU in slot 4 is swapped for a new board, twice
        report = copy.deepcopy(report)
        new = report["gpus"][4]
        new["uuid"] = f"GPU-00000000-0000-4000-8000-00000000000{n}"
        new["serial"] = f"99900000000{n}"
        new["health"] = healthy()
        uuids.append(new["uuid"])
        agent.send(with_events(report, xid(79, bus, now_iso(), uuid=new["uuid"], key=f"k{n}")))
    health_sweep()

    third = Gpu.objects.get(uuid=uuids[2])
    history = gpu_history(gpu_id=third.pk)
    occupants = history["slot"]["occupants"]
    assert [o["uuid"] for o in occupants] == uuids
    assert occupants[0]["start"] is None and occupants[-1]["end"] is None
    assert (
        occupants[0]["end"] == occupants[1]["start"]
        and occupants[1]["end"] == occupants[2]["start"]
    )
    assert history["slot"]["pci_bus_id"] == bus

    second = Gpu.objects.get(uuid=uuids[1])
    roles = [
        (r["role"], r["removed"]["uuid"], r["installed"]["uuid"])
        for r in gpu_history(gpu_id=second.pk)["replacements"]
    ]
    assert roles == [("installed", uuids[0], uuids[1]), ("removed", uuids[1], uuids[2])]

    # two different boards failed in that slot: the slot is the suspect, not the boards
    findings = health_findings()
    slot = [f for f in findings if f.type == FindingType.SLOT_REPEATED_FAILURE]
    assert len(slot) == 1 and bus in slot[0].subject


def test_one_board_seen_under_two_uuids_is_one_history():
    agent = Agent("dgx-01")
    report = server_report("dgx-01")
    agent.send(
        with_events(
            report,
            xid(94, report["gpus"][0]["pci_bus_id"], now_iso(), uuid=report["gpus"][0]["uuid"]),
        )
    )
    again = copy.deepcopy(report)  # back from repair with a new UUID, same serial
    again["gpus"][0]["uuid"] = "GPU-00000000-0000-4000-8000-00000000aaaa"
    agent.send(again)
    health_sweep()
    history = gpu_history(gpu_id=Gpu.objects.get(uuid=again["gpus"][0]["uuid"]).pk)
    assert len(history["gpus"]) == 2 and [e.code for e in history["events"]] == [94]


def test_history_costs_the_same_queries_however_long_it_is():
    agent = Agent("dgx-01")
    report = server_report("dgx-01")
    gpu0 = report["gpus"][0]
    agent.send(with_events(report, xid(13, gpu0["pci_bus_id"], now_iso(), uuid=gpu0["uuid"])))
    health_sweep()
    short = Gpu.objects.get(uuid=gpu0["uuid"])
    with CaptureQueriesContext(connection) as few:
        gpu_history(gpu_id=short.pk)
    for n in range(15):
        changed = copy.deepcopy(report)
        changed["gpus"][0]["health"] = healthy(pcie_replay_count=n + 1)
        event = xid(n % 5 + 40, gpu0["pci_bus_id"], now_iso(), uuid=gpu0["uuid"], key=f"k{n}")
        agent.send(with_events(changed, event))
    health_sweep()
    with CaptureQueriesContext(connection) as many:
        history = gpu_history(gpu_id=short.pk)
    assert len(history["counters"]) == 16 and len(history["events"]) == 6
    assert len(many) == len(few) == 5


def test_findings_come_from_two_queries_whatever_the_fleet():
    for n in range(3):
        agent = Agent(f"dgx-{n}")
        report = server_report(f"dgx-{n}")
        report["gpus"][1]["remapped_rows_failure"] = True
        agent.send(report)
    health_sweep()
    with CaptureQueriesContext(connection) as queries:
        findings = health_findings()
    assert len(queries) == 2
    assert sorted(f.type for f in findings) == [FindingType.GPU_ROW_REMAP_FAILURE] * 3


def _csv(client, path: str, table: str) -> list[dict[str, str]]:
    response = client.get(f"{path}?format=csv&table={table}")
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_gpu_page_and_its_csv_share_the_tables_declaration(client, user):
    agent = Agent("dgx-01")
    first = server_report("dgx-01")
    agent.send(first)
    bus = first["gpus"][4]["pci_bus_id"]
    report = copy.deepcopy(first)
    new = report["gpus"][4]
    new["uuid"], new["serial"], new["health"] = (
        "GPU-00000000-0000-4000-8000-000000000001",
        "999",
        healthy(),
    )
    agent.send(with_events(report, xid(79, bus, now_iso(), uuid=new["uuid"])))
    health_sweep()
    gpu = Gpu.objects.get(uuid=new["uuid"])
    path = f"/gpus/{gpu.pk}/"
    client.force_login(user)
    page = client.get(path).content.decode()
    for table in (
        GPU_PLACEMENTS_TABLE,
        GPU_EVENTS_TABLE,
        GPU_COUNTERS_TABLE,
        GPU_REPLACEMENTS_TABLE,
    ):
        assert f'id="{table.id}"' in page and f"table={table.id}" in page
        rows = _csv(client, path, table.id)
        assert rows and list(rows[0]) == table.headers, table.id
    (replaced,) = _csv(client, path, GPU_REPLACEMENTS_TABLE.id)
    assert (replaced["PCI bus"], replaced["This GPU"], replaced["Installed"]) == (
        bus,
        "installed",
        "999",
    )
    assert replaced["Removed"] == first["gpus"][4]["serial"]
    (event,) = _csv(client, path, GPU_EVENTS_TABLE.id)
    assert (event["Code"], event["Server"], event["Count"]) == ("Xid 79", "dgx-01", "1")
    (placement,) = _csv(client, path, GPU_PLACEMENTS_TABLE.id)
    assert placement["Server"] == "dgx-01" and placement["Until"] == ""  # still there: "now"
    assert '<abbr class="event-code" title="' in page and ">now</td>" in page
    counters = _csv(client, path, GPU_COUNTERS_TABLE.id)
    assert counters[0]["PCIe"].startswith("Gen") and counters[0]["Server"] == "dgx-01"


def test_a_gpu_without_a_serial_is_followed_by_its_uuid():
    """Boards that report no serial (GeForce, some OEM parts) are followed by their UUID, and
    two of them are never one history for sharing an empty serial."""

    def no_serials(report):
        for gpu in report["gpus"]:
            gpu["serial"] = None
        return report

    agents, reports = {}, {}
    for host in ("ws-01", "ws-02"):
        report = no_serials(server_report(host, gpus=2))
        agents[host], reports[host] = Agent(host), report
        gpu0 = report["gpus"][0]
        code = 79 if host == "ws-01" else 48
        agents[host].send(
            with_events(report, xid(code, gpu0["pci_bus_id"], now_iso(), uuid=gpu0["uuid"]))
        )
    moved = copy.deepcopy(reports["ws-01"]["gpus"][0])  # ws-01's board goes to ws-02
    agents["ws-01"].send(no_serials(server_report("ws-01", gpus=2, skip_gpus=(0,))))
    later = copy.deepcopy(reports["ws-02"])
    later["gpus"].append({**moved, "index": 2, "pci_bus_id": "0000:cb:00.0"})
    agents["ws-02"].send(later)
    health_sweep()

    gpu = Gpu.objects.get(uuid=moved["uuid"])
    assert gpu.serial == ""
    history = gpu_history(gpu_id=gpu.pk)
    assert history["identity"] == f"uuid:{moved['uuid']}"
    assert [p["hostname"] for p in history["placements"]] == ["ws-01", "ws-02"]
    assert [(e.code, e.server.hostname) for e in history["events"]] == [(79, "ws-01")]
    other = gpu_history(gpu_id=Gpu.objects.get(uuid=reports["ws-02"]["gpus"][0]["uuid"]).pk)
    assert [e.code for e in other["events"]] == [48]
    assert [p["hostname"] for p in other["placements"]] == ["ws-02"]
