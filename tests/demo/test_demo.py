"""`manage.py demo`, what `make run` shows: the declared fleet through the real API, both
schedulers, reconciled once (no finding that was never true), then kept alive."""

import os
import re
import signal
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from clusters.models import Cluster, Node
from demo.services import demo_load, local_server
from fabric.models import Adapter, Fabric
from findings.models import Finding
from health.models import GpuCounterSample, HealthEvent
from health.selectors import gpus_needing_action
from inventory.models import Gpu, Report, Server
from simulator.demo import DEMO_FABRIC, DEMO_FLEET
from simulator.keepalive import beat_once

User = get_user_model()

# Declared on purpose in simulator.demo: (finding type, what it is about).
EXPECTED_OPEN = {
    ("below_profile", "dgx-h100-10"),
    ("gpu_not_in_nvml", "dgx-h100-10"),
    ("unhealthy_gpu", "dgx-h100-10"),  # its lost GPU has a row, and its Slurm node is idle
    ("mig_pending_reboot", "dgx-a100-01"),
    ("node_unavailable", "gpu-l40s-03"),
    ("node_without_server", "gpu-b02"),
    ("driver_skew", "prod-k8s"),
    ("driver_skew", "hpc-slurm"),
    # the A100's eight rail links train at HDR on the NDR fabric: one finding per leaf
    *(("fabric_link_degraded", f"ib-leaf-r{rail}") for rail in range(1, 9)),
    # the week of GPU health (simulator.demo.DEMO_HEALTH_WEEK)
    ("gpu_fatal_xid", "dgx-h100-10"),  # Xid 79 on the GPU that fell off the bus
    ("gpu_fatal_xid", "dgx-h100-08"),  # Xid 74, an NVLink error last night
    ("gpu_repeated_failure", "dgx-h100-03"),  # Xid 31 again and again: a repeat offender
    ("gpu_row_remap_failure", "dgx-h100-06"),  # no spare row left
    ("unhealthy_gpu", "dgx-h100-06"),  # that GPU's counters, on a schedulable node
    # what the GPUs say of the workloads (simulator.demo.DEMO_PROCESSES, DEMO_JOBS)
    ("process_outside_allocation", "dgx-h100-09"),  # bob's job also runs on GPU 7
    ("stray_gpu_process", "dgx-h100-04"),  # 30 GiB held by no workload's process
    ("workload_on_gpu_needing_action", "job"),  # job 5681 of carol, on dgx-h100-10
    ("workload_on_misreconciled_server", "job"),  # the same job, the same server
}
RESOLVED = {("gpu_fatal_xid", "dgx-h100-02")}  # a double-bit error four days ago, reset since


def findings(**filters) -> set[tuple[str, str]]:
    """(type, the name its message starts with: server, node or cluster)."""
    return {
        (f.type, f.message.split(":")[0].split(" ")[0]) for f in Finding.objects.filter(**filters)
    }


@pytest.mark.django_db(transaction=True)
def test_demo_loads_the_fleet_through_the_api_and_reconciles(capsys):
    call_command("demo")
    assert Server.objects.count() == 18
    assert set(Cluster.objects.values_list("name", "kind")) == {
        ("prod-k8s", "kubernetes"),
        ("hpc-slurm", "slurm"),
    }
    assert Node.objects.filter(server__isnull=True).get().name == "gpu-b02"
    vm = Server.objects.get(hostname="gpu-vm-01")
    assert vm.physical_host.hostname == "kvm-01"
    open_types = set(
        Finding.objects.filter(resolved_at__isnull=True).values_list("type", flat=True)
    )
    assert {"gpu_not_in_nvml", "node_without_server", "below_profile"} <= open_types
    assert Node.objects.get(cluster__name="hpc-slurm", name="dgx-a100-01").gpu_capacity > 8
    assert "18 servers reported" in capsys.readouterr().out
    call_command("demo")  # a second run updates the same servers
    assert Server.objects.count() == 18


@pytest.mark.django_db(transaction=True)
def test_a_fresh_demo_shows_only_its_declared_findings_none_resolved():
    """Every report and both clusters' snapshots are in before the one reconcile: no
    "server in no scheduler" raised for the Slurm servers while only Kubernetes was known.
    Its InfiniBand fabric is a leaf per rail under two spines, and every adapter binds to
    its server by the GUID the server's agent reported."""
    load = demo_load()
    assert load.fabric is not None and load.fabric.unbound == 0
    fabric = Fabric.objects.get(name=DEMO_FABRIC)
    assert fabric.summary["tiers"] == {"leaf": 8, "spine": 2}
    assert fabric.summary["rail_optimised"] is True
    roce = Fabric.objects.get(name="ethernet")  # the L40S servers' RoCE leaves, from LLDP
    assert roce.summary["tiers"] == {"leaf": 2} and roce.summary["rail_optimised"] is True
    assert sorted(Adapter.objects.filter(fabric=roce).values_list("server__hostname", "rail")) == [
        (f"gpu-l40s-0{n}", rail) for n in (1, 2, 3) for rail in (1, 2)
    ]
    adapters = Adapter.objects.filter(fabric=fabric)
    assert set(adapters.values_list("binding_method", flat=True)) == {"guid"}
    ib_servers = {d.hostname for d in DEMO_FLEET if d.profile in ("h100", "h100-lost", "a100-mig")}
    assert set(adapters.values_list("server__hostname", flat=True)) == ib_servers
    for server in Server.objects.filter(hostname__in=ib_servers):
        assert sorted(adapters.filter(server=server).values_list("rail", flat=True)) == list(
            range(1, 9)
        ), server.hostname
    assert findings(resolved_at__isnull=False) == RESOLVED
    assert findings(resolved_at__isnull=True) == EXPECTED_OPEN
    for server in DEMO_FLEET:
        stored = Server.objects.get(hostname=server.hostname)
        assert (stored.rack or None, stored.rack_position) == (server.rack, server.rack_position)
        bound = set(Node.objects.filter(server=stored).values_list("cluster__name", flat=True))
        assert bound == {node.cluster for node in server.nodes}, server.hostname


@pytest.mark.django_db(transaction=True)
def test_the_demo_has_a_week_of_gpu_health_on_the_health_and_gpu_pages(client):
    """`make run` shows Xid tracking: events over the past week, a repeat offender, a row-remap
    failure, the Xid 79 of the GPU that fell off the bus, an NVLink error, one episode resolved."""
    demo_load()
    now = timezone.now()
    events = HealthEvent.objects.all()
    assert {e.code for e in events} >= {13, 31, 48, 63, 64, 74, 79}
    assert min(e.first_seen for e in events) < now - timedelta(days=6)
    assert max(e.last_seen for e in events) > now - timedelta(hours=4)
    offender = events.filter(code=31)
    assert offender.count() == 5 and len({e.gpu_id for e in offender}) == 1
    (xid79,) = events.filter(code=79)
    assert xid79.gpu.status == "lost" and xid79.server.hostname == "dgx-h100-10"
    remap = Gpu.objects.get(server__hostname="dgx-h100-06", index=4)
    assert remap.remapped_rows_failure is True
    nvlink = GpuCounterSample.objects.get(
        current=True, gpu__server__hostname="dgx-h100-08", gpu__index=1
    )
    assert nvlink.nvlink_crc_errors and nvlink.nvlink_replay_errors
    (resolved,) = Finding.objects.filter(resolved_at__isnull=False)
    assert resolved.first_seen < now - timedelta(days=3) and "Xid 48" in resolved.message

    client.force_login(User.objects.get(username="admin"))
    health = client.get("/health/").content.decode()
    assert "lost: fell off the bus" in health
    assert "open health finding: GPU failing again" in health
    assert "open health finding: Row remapping failed" in health
    assert "open health finding: Fatal Xid 74" in health
    page = client.get(f"/gpus/{xid79.gpu_id}/").content.decode()
    assert "Xid 79" in page
    page = client.get(f"/gpus/{offender.first().gpu_id}/").content.decode()
    assert page.count("Xid 31") >= 5

    # one answer: the health page, the GPUs page and the overview, the same count and names
    rows = gpus_needing_action()
    named = {(r.gpu_id, r.name, r.words) for r in rows}
    assert ("lost: fell off the bus") in {w for _, _, w in named}
    shown = client.get("/health/").context["tables"]["needing_action"]
    assert len(shown.rows) == len(rows)
    listed = client.get("/gpus/?action=needed")
    assert {(g.pk, g.needs_action.name, g.needs_action.words) for g in listed.context["page"]} == (
        named
    )
    assert f"{len(rows)}</span> GPUs need action" in listed.content.decode()
    overview = client.get("/")
    card = overview.context["health"]
    assert card["needing_action"] == len(rows)
    assert {(n, r["label"]) for r in card["by_reason"] for n in r["names"]} == {
        (n, w) for _, n, w in named
    }
    assert f"{len(rows)}</span> GPUs need action" in overview.content.decode()


@pytest.mark.django_db(transaction=True)
def test_one_keep_alive_beat_refreshes_the_fleet_and_changes_no_finding():
    load = demo_load()
    before = {s.hostname: s.last_seen for s in Server.objects.all()}
    nodes_before = dict(Node.objects.values_list("id", "last_seen"))
    found_before = set(Finding.objects.values_list("id", "type", "subject", "resolved_at"))
    reports_before = Report.objects.count()
    started = timezone.now()

    with local_server() as url:
        beat = beat_once(url, load.plan)

    assert (beat.sent, beat.snapshots, beat.unreachable, beat.refused) == (18, 4, False, False)
    after = {s.hostname: s.last_seen for s in Server.objects.all()}
    assert set(after) == set(before)
    assert all(after[name] > before[name] and after[name] >= started for name in after)
    nodes_after = dict(Node.objects.values_list("id", "last_seen"))
    assert all(nodes_after[i] > nodes_before[i] for i in nodes_before if i in nodes_after)
    # heartbeats: the same facts, so no stored report and no finding raised or resolved
    assert Report.objects.count() == reports_before
    assert set(Finding.objects.values_list("id", "type", "subject", "resolved_at")) == (
        found_before
    )


@pytest.mark.django_db(transaction=True)
def test_demo_keep_alive_leaves_a_process_that_keeps_the_fleet_reporting(capsys):
    """What `make run` starts: the demo, then a background process beating to the server."""
    with local_server() as url:
        call_command("demo", keep_alive=url, interval=0.5)
        out = capsys.readouterr().out
        pid = int(re.search(r"process (\d+)", out).group(1))
        loaded = timezone.now()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (
                Server.objects.filter(last_seen__lte=loaded).exists()
            ):
                time.sleep(0.2)
            assert not Server.objects.filter(last_seen__lte=loaded).exists(), "no beat"
        finally:
            os.kill(pid, signal.SIGTERM)
            _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert findings(resolved_at__isnull=False) == RESOLVED
