"""The scheduler layer's services schedule their own reconcile, on commit (issue 22): a
snapshot or a manual binding through the service alone, with no view or command around it."""

from __future__ import annotations

import pytest

from clusters.choices import BindingMethod
from clusters.models import Node, ReconcileState
from clusters.reconcile import reconcile_all
from clusters.services import node_bind, snapshot_ingest, snapshot_receive
from findings.choices import FindingType
from tests.nodes import k8s_node, k8s_node_list
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def open_types() -> set[tuple[str, str | None]]:
    from findings.models import Finding

    return {
        (f.type, f.server.hostname if f.server else f.subject)
        for f in Finding.objects.filter(resolved_at__isnull=True).select_related("server")
    }


def test_a_snapshot_through_the_service_alone_is_reconciled_after_commit(
    django_capture_on_commit_callbacks,
):
    servers = apply_reports(make_report("dgx-01"))
    raw = k8s_node_list(k8s_node("dgx-01", system_uuid=servers["dgx-01"].system_uuid))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert snapshot_receive(cluster_name="prod", raw=raw.encode()).status == "applied"
    node = Node.objects.get(name="dgx-01")
    assert node.server_id is None  # nothing reconciled before the commit
    for callback in callbacks:
        callback()  # the commit: the reconcile runs (in-process tasks)
    node.refresh_from_db()
    assert node.server_id == servers["dgx-01"].pk
    assert ReconcileState.objects.get().requested_at is None


def test_a_snapshot_that_rolls_back_requests_no_reconcile(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("a")))
    assert len(callbacks) == 1  # one reconcile request, on commit only
    held = k8s_node_list()  # an empty node list would mark the last node gone: held
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert snapshot_ingest(cluster_name="prod", raw=held).status == "held"
    assert callbacks == []


def test_a_manual_binding_through_the_service_is_reconciled_after_commit(
    django_capture_on_commit_callbacks,
):
    servers = apply_reports(make_report("dgx-01"), make_report("spare-01"))
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("ghost")))
    reconcile_all()
    node = Node.objects.get(name="ghost")
    ghost = (FindingType.NODE_WITHOUT_SERVER, f"node:{node.pk}")
    assert {ghost, (FindingType.SERVER_WITHOUT_NODE, "spare-01")} <= open_types()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        node_bind(node=node, server=servers["spare-01"])
        assert (FindingType.SERVER_WITHOUT_NODE, "spare-01") in open_types()  # not yet
    assert len(callbacks) == 1
    node.refresh_from_db()
    assert (node.server_id, node.binding_method) == (servers["spare-01"].pk, BindingMethod.MANUAL)
    assert (FindingType.SERVER_WITHOUT_NODE, "spare-01") not in open_types()
    assert ghost not in open_types()
