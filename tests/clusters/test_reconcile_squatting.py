"""Identity squatting: another agent's copy of a server's hostname, FQDN or address never
moves a node bound to that server; it is a finding naming both until the copy stops."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from clusters.models import Node
from clusters.services import node_bind, snapshot_ingest
from findings.choices import FindingType
from findings.models import Finding
from inventory.models import AgentToken, Server
from inventory.services import agent_token_create, report_apply, report_receive
from tests.clusters.test_reconcile_changes import judged_like_a_forced_pass
from tests.nodes import scontrol_node, scontrol_text
from tests.reports import address_of, make_report

pytestmark = pytest.mark.django_db


def send(token: AgentToken, report: dict) -> None:
    result = report_receive(token=token, body=json.dumps(report).encode())
    if result.status == "pending" and result.report_id is not None:
        report_apply(report_id=result.report_id)


def squatter_report(**host) -> dict:
    """dgx-09's own report (its UUID, machine-id), with `host` copied from dgx-01's."""
    report = make_report("dgx-09")
    report["host"].update(host)
    return report


def claims() -> list[Finding]:
    return list(
        Finding.objects.filter(
            type=FindingType.DUPLICATE_IDENTITY, subject__startswith="node:", resolved_at=None
        )
    )


def setup_a(node: str) -> tuple[Server, AgentToken]:
    """dgx-01 reported with its own token, Slurm node `gpu-01` bound to it; dgx-09's token."""
    send(agent_token_create(name="dgx-01")[0], make_report("dgx-01"))
    snapshot_ingest(cluster_name="hpc", raw=scontrol_text(node))
    judged_like_a_forced_pass()
    a = Server.objects.get(hostname="dgx-01")
    assert Node.objects.get(name="gpu-01").server_id == a.id
    return a, agent_token_create(name="dgx-09")[0]


COPIES: dict[str, tuple[str, dict[str, Any]]] = {
    "hostname": (scontrol_node("gpu-01", hostname="dgx-01"), {"hostname": "dgx-01"}),
    "fqdn": (
        scontrol_node("gpu-01", hostname="dgx-01.cluster.example"),
        {"fqdn": "dgx-01.cluster.example"},
    ),
    "address": (
        scontrol_node("gpu-01", addr=address_of("dgx-01"), hostname="gpu-01"),
        {"addresses": [address_of("dgx-01")]},
    ),
}


@pytest.mark.parametrize("method", sorted(COPIES))
def test_a_copied_identity_moves_no_binding_and_names_both(method):
    node_text, copied = COPIES[method]
    a, token = setup_a(node_text)
    assert Node.objects.get(name="gpu-01").binding_method == method

    send(token, squatter_report(**copied))
    judged_like_a_forced_pass()
    node = Node.objects.get(name="gpu-01")
    assert (node.server_id, node.binding_method) == (a.id, method)
    (found,) = claims()
    assert (found.node_id, found.server_id) == (node.id, a.id)
    squatter = Server.objects.exclude(id=a.id).get()
    assert found.details == {"servers": [a.id, squatter.id], "bound_to": a.id}

    # The squatter's next report is its own again: resolved, nothing moved.
    send(token, make_report("dgx-09"))
    judged_like_a_forced_pass()
    assert claims() == []
    assert Node.objects.get(name="gpu-01").server_id == a.id


def test_a_squatter_going_offline_resolves_the_finding_in_a_pass_judging_changes():
    a, token = setup_a(COPIES["hostname"][0])
    send(token, squatter_report(hostname="dgx-01"))
    judged_like_a_forced_pass()
    assert len(claims()) == 1

    gone = timezone.now() - timedelta(seconds=settings.ATLAS_SERVER_OFFLINE_AFTER_S + 60)
    Server.objects.filter(hostname="dgx-01", id__gt=a.id).update(last_seen=gone)
    judged_like_a_forced_pass()
    assert claims() == []
    assert Node.objects.get(name="gpu-01").server_id == a.id

    # Back online, still copying: the finding again, the node still on dgx-01.
    Server.objects.filter(hostname="dgx-01", id__gt=a.id).update(last_seen=timezone.now())
    judged_like_a_forced_pass()
    assert len(claims()) == 1
    assert Node.objects.get(name="gpu-01").server_id == a.id


def test_an_unbound_node_two_servers_claim_is_bound_by_neither_until_one_goes():
    send(agent_token_create(name="dgx-01")[0], make_report("dgx-01"))
    token = agent_token_create(name="dgx-09")[0]
    send(token, squatter_report(hostname="dgx-01"))
    snapshot_ingest(cluster_name="hpc", raw=scontrol_text(COPIES["hostname"][0]))
    judged_like_a_forced_pass()
    assert Node.objects.get(name="gpu-01").server_id is None
    (found,) = claims()
    assert found.details["servers"] == ["dgx-01", "dgx-01"]

    send(token, make_report("dgx-09"))
    judged_like_a_forced_pass()
    assert Node.objects.get(name="gpu-01").server_id == Server.objects.get(hostname="dgx-01").id
    assert claims() == []


def test_a_manual_binding_is_untouched_by_a_copy():
    a, token = setup_a(COPIES["hostname"][0])
    send(token, squatter_report(hostname="dgx-01"))
    b = Server.objects.get(hostname="dgx-01", id__gt=a.id)
    node_bind(node=Node.objects.get(name="gpu-01"), server=b)
    judged_like_a_forced_pass()
    node = Node.objects.get(name="gpu-01")
    assert (node.server_id, node.binding_method) == (b.id, "manual")
    assert claims() == []
