"""Fabric findings kept as `findings.Finding` rows: raised, resolved, reopened, scoped to
the fabric that raised them, and written in a fixed number of queries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.reconcile import reconcile_all
from fabric.findings import fabric_findings_sync, fabric_findings_sync_all
from fabric.models import Fabric
from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from findings.choices import FindingType
from findings.models import Finding

from .conftest import without_cable

pytestmark = pytest.mark.django_db


def _open(type_: str) -> list[Finding]:
    return list(Finding.objects.filter(type=type_, resolved_at__isnull=True))


def _sync(name: str = "f"):
    return fabric_findings_sync(fabric=Fabric.objects.get(name=name))


def test_a_slow_cable_is_raised_then_resolved_when_it_runs_at_full_rate():
    slow = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4, slow={("gpu00003", 1): "4xHDR"})
    fabric_snapshot_ingest(fabric_name="f", raw=slow.text)
    result = _sync()

    (finding,) = _open(FindingType.FABRIC_LINK_DEGRADED)
    assert result.raised == 1 and result.open == 1
    assert finding.subject.startswith("fabric:f/link:")
    assert "4xHDR" in finding.message and "slower" in finding.message

    fabric_snapshot_ingest(
        fabric_name="f", raw=synthetic_fabric(servers=8, rails=2, servers_per_leaf=4).text
    )
    result = _sync()
    assert result.resolved == 1 and not _open(FindingType.FABRIC_LINK_DEGRADED)
    assert Finding.objects.get(pk=finding.pk).resolved_at is not None

    fabric_snapshot_ingest(fabric_name="f", raw=slow.text)  # back: the same row reopens
    _sync()
    again = Finding.objects.get(pk=finding.pk)
    assert again.resolved_at is None and again.reopened_count == 1


def test_a_port_gone_is_raised_and_resolved_when_it_returns():
    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4)
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    fabric_snapshot_ingest(fabric_name="f", raw=without_cable(built.text, "gpu00003 mlx5_0"))
    _sync()
    (gone,) = _open(FindingType.FABRIC_PORT_GONE)
    assert "gpu00003 mlx5_0" in gone.message

    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    _sync()
    assert not _open(FindingType.FABRIC_PORT_GONE)


def test_a_fabric_resolves_only_its_own_findings():
    fabric_snapshot_ingest(
        fabric_name="f", raw=synthetic_fabric(servers=8, rails=2, servers_per_leaf=4).text
    )
    other_app = Finding.objects.create(
        type="stale_agent", severity="warning", subject="server:1", message="stale"
    )
    other_fabric = Finding.objects.create(
        type=FindingType.FABRIC_LINK_DEGRADED,
        severity="warning",
        subject="fabric:g/link:x",
        message="slow",
    )
    # A prefix of this fabric's name is another fabric: "f" must not take "ff"'s findings.
    prefixed = Finding.objects.create(
        type=FindingType.FABRIC_LINK_DEGRADED,
        severity="warning",
        subject="fabric:ff/link:x",
        message="slow",
    )
    mine = Finding.objects.create(
        type=FindingType.FABRIC_LINK_DEGRADED,
        severity="warning",
        subject="fabric:f/link:old",
        message="slow",
    )

    result = _sync()

    assert result.resolved == 1
    assert Finding.objects.get(pk=mine.pk).resolved_at is not None
    for kept in (other_app, other_fabric, prefixed):
        assert Finding.objects.get(pk=kept.pk).resolved_at is None


def test_the_periodic_pass_resolves_the_findings_of_a_deleted_fabric():
    fabric_snapshot_ingest(
        fabric_name="f", raw=synthetic_fabric(servers=8, rails=2, servers_per_leaf=4).text
    )
    orphan = Finding.objects.create(
        type=FindingType.FABRIC_PORT_GONE,
        severity="warning",
        subject="fabric:deleted/link:x",
        message="gone",
    )
    results = fabric_findings_sync_all()
    assert [r.fabric for r in results] == ["f"]
    assert Finding.objects.get(pk=orphan.pk).resolved_at is not None


def test_scheduler_reconciliation_leaves_fabric_findings_open():
    kept = Finding.objects.create(
        type=FindingType.FABRIC_WRONG_RAIL,
        severity="warning",
        subject="fabric:f/adapter:x",
        message="rail",
    )
    reconcile_all()
    assert Finding.objects.get(pk=kept.pk).resolved_at is None


def test_the_findings_pass_costs_the_same_queries_whatever_the_fabric():
    def queries(servers: int) -> int:
        slow = {(f"gpu{n:05d}", 1): "4xHDR" for n in range(1, servers // 4)}
        name = f"q{servers}"
        built = synthetic_fabric(servers=servers, rails=4, servers_per_leaf=4, slow=slow)
        fabric_snapshot_ingest(fabric_name=name, raw=built.text)
        with CaptureQueriesContext(connection) as captured:
            result = _sync(name)
        assert result.raised == len(slow)
        return len(captured)

    assert queries(16) == queries(64)


def test_a_pushed_topology_conf_that_disagrees_stays_a_finding_until_one_agrees(staff):
    from rest_framework.test import APIClient

    from clusters.models import Cluster, Node
    from inventory.models import Server

    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4, spines_per_pod=2)
    cluster = Cluster.objects.create(name="hpc", kind="slurm")
    for number, host in enumerate(built.servers, start=1):
        server = Server.objects.create(identity=f"hostname:{host}", hostname=host)
        Node.objects.create(cluster=cluster, name=f"n{number:03d}", kind="slurm", server=server)
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    client = APIClient()
    client.force_authenticate(staff)
    url = "/api/v1/clusters/hpc/topology/"
    wrong = "SwitchName=s1 Nodes=n[001-003],n005\nSwitchName=s2 Nodes=n[006-008],n004\n"
    good = "SwitchName=s1 Nodes=n[001-004]\nSwitchName=s2 Nodes=n[005-008]\n"

    client.generic("POST", url, wrong, content_type="text/plain")
    raised = _open(FindingType.FABRIC_TOPOLOGY_MISMATCH)
    assert raised and all(f.cluster_id == cluster.pk for f in raised)
    _sync()  # the fabric's own pass leaves the cluster's topology findings alone
    assert len(_open(FindingType.FABRIC_TOPOLOGY_MISMATCH)) == len(raised)

    client.generic("POST", url, good, content_type="text/plain")
    assert not _open(FindingType.FABRIC_TOPOLOGY_MISMATCH)
