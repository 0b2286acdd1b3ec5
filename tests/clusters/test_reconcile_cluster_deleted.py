"""A cluster deleted while a reconcile pass runs ends that pass cleanly: the other clusters'
nodes and findings are judged as ever, the deleted one's nodes and findings are simply gone
(they cascade with it), and the next pass leaves what a pass judging everything leaves."""

from __future__ import annotations

import pytest

from clusters import reconcile
from clusters.models import Cluster, JudgedNode, Node
from clusters.reconcile import reconcile_all, reconcile_servers
from clusters.services import snapshot_ingest
from findings.choices import FindingType
from findings.models import Finding
from tests.clusters.test_reconcile_changes import (
    build,
    judged_like_a_forced_pass,
    k8s_snapshot,
    slurm_snapshot,
)

pytestmark = pytest.mark.django_db


def _delete_prod_after(monkeypatch, step: str) -> list[int]:
    """Delete the `prod` cluster right after the pass's `step` (a function of
    clusters/reconcile.py) returned: once, the first time it runs."""
    real = getattr(reconcile, step)
    deleted: list[int] = []

    def then_delete(*args, **kwargs):
        found = real(*args, **kwargs)
        if not deleted:
            prod = Cluster.objects.get(name="prod")
            deleted.append(prod.id)
            prod.delete()
        return found

    monkeypatch.setattr(reconcile, step, then_delete)
    return deleted


def _prod_is_gone(prod_id: int) -> None:
    assert not Node.objects.filter(cluster_id=prod_id).exists()
    assert not Finding.objects.filter(cluster_id=prod_id).exists()
    assert not Finding.objects.filter(node__isnull=False, node__cluster_id=prod_id).exists()


def _the_next_pass_catches_up() -> None:
    """The next pass leaves what a pass judging everything leaves: prod's servers are in no
    scheduler now."""
    judged_like_a_forced_pass()
    alone = Finding.objects.filter(type=FindingType.SERVER_WITHOUT_NODE, resolved_at__isnull=True)
    assert set(alone.values_list("server__hostname", flat=True)) == {"dgx-01", "kvm-01", "vm-a"}
    # The deleted nodes' digests went with that pass (the nodes vanished).
    judged = set(JudgedNode.objects.values_list("node_id", flat=True))
    assert judged == set(Node.objects.filter(gone_at__isnull=True).values_list("id", flat=True))


def _hpc_is_judged() -> None:
    hpc = Cluster.objects.get(name="hpc")
    assert Node.objects.filter(cluster=hpc, server__isnull=False).count() == 3
    skew = Finding.objects.filter(type=FindingType.DRIVER_SKEW, resolved_at__isnull=True)
    assert list(skew.values_list("cluster__name", flat=True)) == ["hpc"]


@pytest.mark.parametrize("step", ["_load_nodes", "changes", "globals_now", "_bind"])
def test_a_cluster_deleted_during_a_full_pass(monkeypatch, step):
    build()
    deleted = _delete_prod_after(monkeypatch, step)
    result = reconcile_all(force=True)
    assert deleted and result.full
    monkeypatch.undo()
    _prod_is_gone(deleted[0])
    _hpc_is_judged()
    _the_next_pass_catches_up()


@pytest.mark.parametrize("step", ["_load_nodes", "changes", "_bind", "_driver_skew"])
def test_a_cluster_deleted_during_a_pass_judging_what_changed(monkeypatch, step):
    servers = build()
    reconcile_all()
    # A prod node changes, and an hpc node: the next pass judges both clusters' nodes.
    k8s_snapshot(servers, **{"dgx-02": {"allocatable": 6}})
    slurm_snapshot(**{"dgx-03": {"state": "DRAIN", "reason": "bad_fan"}})
    deleted = _delete_prod_after(monkeypatch, step)
    result = reconcile_all()
    # Deleted before the pass read the clusters, the cluster changed the globals: a full pass.
    assert deleted and result.full == (step == "changes")
    monkeypatch.undo()
    _prod_is_gone(deleted[0])
    _hpc_is_judged()
    drained = Finding.objects.filter(type=FindingType.NODE_UNAVAILABLE, resolved_at__isnull=True)
    assert list(drained.values_list("node__name", flat=True)) == ["gpu-03"]
    _the_next_pass_catches_up()


def test_a_cluster_deleted_while_a_server_is_judged(monkeypatch):
    servers = build()
    reconcile_all()
    deleted = _delete_prod_after(monkeypatch, "_load_nodes")
    reconcile_servers(server_ids=[servers["dgx-01"].id, servers["dgx-02"].id])
    monkeypatch.undo()
    _prod_is_gone(deleted[0])
    _hpc_is_judged()


def test_a_cluster_created_during_a_pass_waits_for_the_next_one(monkeypatch):
    """Its nodes, read beside clusters the pass did not read, raise no KeyError: they are
    judged by the next pass (the new cluster changes the globals)."""
    from tests.nodes import scontrol_node, scontrol_text

    build()
    real = reconcile.globals_now

    def then_create(*args, **kwargs):
        found = real(*args, **kwargs)
        snapshot_ingest(cluster_name="new", raw=scontrol_text(scontrol_node("lonely-01")))
        return found

    monkeypatch.setattr(reconcile, "globals_now", then_create)
    reconcile_all(force=True)
    monkeypatch.undo()
    judged_like_a_forced_pass()
    lonely = Finding.objects.get(type=FindingType.NODE_WITHOUT_SERVER, node__name="lonely-01")
    assert lonely.resolved_at is None
