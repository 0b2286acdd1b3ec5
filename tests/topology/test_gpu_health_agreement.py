"""One fleet, one answer: the GPUs page, the findings and placement name the same unhealthy GPUs.

A server bound to a schedulable Kubernetes node has an uncorrected ECC error on GPU 1, a row
remap pending a reset on GPU 2, and has lost GPU 3 (its last report no longer shows it): a
critical "unhealthy GPU on a schedulable node" finding about the server, so every GPU of it
needs action (`health.action`). Then GPU 4 falls off the bus: the health rules name it by its
Xid, and the health page, the GPUs page, placement, failure domains, the capacity planner and
the overview agree.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.reconcile import reconcile_all
from findings.choices import FindingType
from findings.models import Finding
from health.selectors import gpus_needing_action, needing_action_share
from health.services import health_findings_sync, health_sweep
from inventory.health import GpuProblem
from inventory.models import AgentToken, Gpu, Server
from inventory.services import report_apply, report_receive
from placement.failure_domains import capacity_after, failure_domain
from placement.selectors import fleet_counts, fleet_load
from placement.service import placement_find
from tests.placement.fleets import k8s_fleet
from tests.reports import gpu_uuid, make_report

pytestmark = pytest.mark.django_db

UNHEALTHY = {1: "uncorrected_ecc", 2: "reset_pending", 3: "lost"}


@pytest.fixture
def fleet():
    first = make_report("dgx-01")
    last = make_report("dgx-01", skip_gpus=(3,))
    last["gpus"][1]["ecc_errors_uncorrected"] = 2
    last["gpus"][2]["remapped_rows_pending"] = True
    for gpu in last["gpus"]:
        gpu.setdefault("ecc_errors_uncorrected", 0)
        gpu.setdefault("remapped_rows_failure", False)
    k8s_fleet([first])
    token = AgentToken.objects.get(name="dgx-01")
    received = report_receive(token=token, body=json.dumps(last).encode())
    report_apply(report_id=received.report_id)
    reconcile_all()
    assert Gpu.objects.get(uuid=gpu_uuid("dgx-01", 3)).status == "lost"
    return {gpu_uuid("dgx-01", i) for i in UNHEALTHY}


def test_the_gpus_page_findings_and_placement_name_the_same_unhealthy_gpus(fleet, client, user):
    client.force_login(user)
    page = client.get("/gpus/?health=unhealthy")
    assert {g.uuid for g in page.context["page"]} == fleet
    assert "8</span> GPUs need action" in page.content.decode()
    healthy = client.get("/gpus/?health=healthy")
    assert {g.uuid for g in healthy.context["page"]}.isdisjoint(fleet)
    assert len(healthy.context["page"]) == 5

    (finding,) = Finding.objects.filter(type=FindingType.UNHEALTHY_GPU, resolved_at=None)
    assert set(finding.details["gpus"]) == fleet
    assert "1 GPU(s) lost" in finding.message and finding.severity == "critical"
    assert "1 GPU(s) with uncorrected ECC errors" in finding.message
    assert "1 GPU(s) with page retirement/row remap pending a reset" in finding.message

    (node,) = fleet_load(cluster="prod").nodes
    uuids = dict(Gpu.objects.values_list("id", "uuid"))
    excluded = {uuids[g.id]: g.problem for g in node.gpus if g.problem}
    assert excluded == {gpu_uuid("dgx-01", i): p for i, p in UNHEALTHY.items()}
    # the critical finding about the server: every GPU of it needs action, none is placed
    assert {uuids[g.id] for g in node.gpus if g.action} == set(uuids.values())
    result = placement_find(cluster="prod", gpus=1)
    assert not result.fits and result.blocked[0].reason == "unhealthy_gpu"
    assert "unhealthy: 1 lost, 1 page retirement or row remap pending a reset, 1 uncorrected" in (
        result.blocked[0].detail
    )
    assert (
        "need action: 5 server has a critical finding: Unhealthy GPU on a schedulable node"
        in result.blocked[0].detail
    )

    counted = fleet_counts(cluster="prod")
    assert [n.healthy_whole for n in counted.nodes] == [0]
    after = capacity_after(counted, set())
    assert after["clusters"][0]["largest_node_free_before"] == 0


def test_the_api_filter_is_the_same_rule(fleet, api):
    body = api.get("/api/v1/gpus/?health=unhealthy").json()
    assert {g["uuid"] for g in body["results"]} == fleet
    assert api.get("/api/v1/gpus/?health=sick").status_code == 400


def test_a_healed_gpu_leaves_every_view_together(fleet, client, user):
    Gpu.objects.filter(uuid=gpu_uuid("dgx-01", 1)).update(ecc_errors_uncorrected=0)
    reconcile_all()
    client.force_login(user)
    listed = {g.uuid for g in client.get("/gpus/?health=unhealthy").context["page"]}
    (finding,) = Finding.objects.filter(type=FindingType.UNHEALTHY_GPU, resolved_at=None)
    (node,) = fleet_load(cluster="prod").nodes
    excluded = {g.id for g in node.gpus if g.problem}
    uuids = set(Gpu.objects.filter(id__in=excluded).values_list("uuid", flat=True))
    assert listed == set(finding.details["gpus"]) == uuids == fleet - {gpu_uuid("dgx-01", 1)}
    assert GpuProblem.UNCORRECTED_ECC.label not in finding.message


# A GPU needing action: healthy by its counters, but an open health finding asks to drain it.

DRAINED = 4  # GPU 4 falls off the bus (Xid 79): a fatal event, a finding, an action


@pytest.fixture
def drained(fleet):
    report = make_report("dgx-01", skip_gpus=(3,))
    for gpu in report["gpus"]:
        gpu.update(ecc_errors_uncorrected=0, remapped_rows_failure=False)
    report["gpus"][1]["ecc_errors_uncorrected"] = 2
    report["gpus"][2]["remapped_rows_pending"] = True
    bus = next(g["pci_bus_id"] for g in report["gpus"] if g["index"] == DRAINED)
    seen = (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    report["events"] = [
        {
            "kind": "xid",
            "code": 79,
            "pci_bus_id": bus,
            "gpu_uuid": gpu_uuid("dgx-01", DRAINED),
            "time": seen,
            "message": "GPU has fallen off the bus.",
            "count": 1,
        }
    ]
    token = AgentToken.objects.get(name="dgx-01")
    report_apply(report_id=report_receive(token=token, body=json.dumps(report).encode()).report_id)
    reconcile_all()
    health_sweep()
    health_findings_sync()
    needing = {row.uuid for row in gpus_needing_action()}
    assert gpu_uuid("dgx-01", DRAINED) in needing
    return needing


def test_placement_failure_domains_capacity_and_pages_skip_the_same_gpus_needing_action(
    fleet, drained, client, user, api
):
    everyone = set(Gpu.objects.values_list("uuid", flat=True))
    assert drained == everyone  # every GPU of the server, the lost one included
    live_needing = drained - {gpu_uuid("dgx-01", 3)}
    drain = Gpu.objects.get(uuid=gpu_uuid("dgx-01", DRAINED))
    client.force_login(user)

    # the health page lists them, each with its reason
    rows = {row.uuid: row.words for row in gpus_needing_action()}
    assert rows[drain.uuid] == "open health finding: Fatal Xid 79"
    assert rows[gpu_uuid("dgx-01", 0)] == (
        "server has a critical finding: Unhealthy GPU on a schedulable node"
    )
    assert rows[gpu_uuid("dgx-01", 3)].startswith("lost: ")
    page = client.get("/health/").content.decode()
    assert all(f'href="/gpus/{pk}/"' in page for pk in Gpu.objects.values_list("pk", flat=True))
    assert "open health finding: Fatal Xid 79" in page
    # the GPUs page: the same count, and the same reason per GPU
    listed = client.get("/gpus/?action=needed")
    assert {g.uuid for g in listed.context["page"]} == drained
    assert {g.uuid: g.needs_action.words for g in listed.context["page"]} == rows
    assert f"{len(drained)}</span> GPUs need action" in listed.content.decode()

    # placement reads the same rule and skips them, in words and per node
    (node,) = fleet_load(cluster="prod").nodes
    uuids = dict(Gpu.objects.values_list("id", "uuid"))
    assert {uuids[g.id] for g in node.gpus if g.action} == drained
    assert node.gpus_needing_action == len(live_needing)
    result = placement_find(cluster="prod", gpus=1)
    assert not result.fits and result.blocked[0].reason == "unhealthy_gpu"
    assert "1 open health finding: Fatal Xid 79" in result.blocked[0].detail
    assert result.gpus_needing_action == len(live_needing)
    assert result.needing_action[0].node == node.name
    assert f"{len(live_needing)} GPU(s) on 1 node(s) skipped" in result.health
    shown = client.get("/placement/?cluster=prod&gpus=1").content.decode()
    assert 'id="placement-needing-action"' in shown and "1 open health finding: Fatal Xid 79" in (
        shown
    )
    body = api.get("/api/v1/placement/?cluster=prod&gpus=1").json()
    assert not body["fits"] and body["gpus_needing_action"] == len(live_needing)

    # failure domains and capacity count them as lost already, each with its reason
    counted = fleet_counts(cluster="prod")
    assert [(n.healthy_whole, n.needing_action) for n in counted.nodes] == [(0, len(live_needing))]
    (prod,) = capacity_after(counted, set())["clusters"]
    assert prod["gpus_needing_action"] == len(live_needing)
    server = Server.objects.get(hostname="dgx-01")
    domain = failure_domain(server=server.pk)
    assert domain["gpus_needing_action"] == len(live_needing)
    assert {g["uuid"] for g in domain["gpu_list"] if g["needs_action"]} == live_needing
    assert {g["uuid"]: g["action_reason"] for g in domain["gpu_list"]} == {
        u: rows[u] for u in live_needing
    }
    assert needing_action_share() == pytest.approx(1.0)
    layouts = client.get("/placement/?tab=capacity&gpus=80&per_server=8,1")
    assert layouts.context["capacity"]["action_share"] == 1.0
    assert "open health finding: Fatal Xid 79" in layouts.content.decode()

    # the overview shows them by reason, each GPU named
    overview = client.get("/")
    card = overview.context["health"]
    assert card["needing_action"] == len(drained)
    by_reason = {r["label"]: r for r in card["by_reason"]}
    assert by_reason["open health finding: Fatal Xid 79"]["names"] == [f"dgx-01 GPU {DRAINED}"]
    assert card["events"][0]["episodes"] >= 1 and card["events"][0]["critical"] >= 1
    text = overview.content.decode()
    assert 'id="overview-health"' in text and "open health finding: Fatal Xid 79" in text
    assert f"{len(drained)}</span> GPUs need action" in text
