"""`manage.py demo`, what `make run` shows: the declared fleet through the real API, both
schedulers, reconciled once (no finding that was never true), then kept alive."""

import os
import re
import signal
import time

import pytest
from django.core.management import call_command
from django.utils import timezone

from clusters.models import Cluster, Node
from demo.services import demo_load, local_server
from fabric.models import Adapter, Fabric
from findings.models import Finding
from inventory.models import Report, Server
from simulator.demo import DEMO_FABRIC, DEMO_FLEET
from simulator.keepalive import beat_once

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
}


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
    assert Finding.objects.filter(resolved_at__isnull=False).count() == 0
    assert findings(resolved_at__isnull=True) == EXPECTED_OPEN
    for server in DEMO_FLEET:
        stored = Server.objects.get(hostname=server.hostname)
        assert (stored.rack or None, stored.rack_position) == (server.rack, server.rack_position)
        bound = set(Node.objects.filter(server=stored).values_list("cluster__name", flat=True))
        assert bound == {node.cluster for node in server.nodes}, server.hostname


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

    assert (beat.sent, beat.snapshots, beat.unreachable, beat.refused) == (18, 3, False, False)
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
    assert Finding.objects.filter(resolved_at__isnull=False).count() == 0
