"""One fleet, one answer: the GPUs page, the findings and placement name the same unhealthy GPUs.

A server bound to a schedulable Kubernetes node has an uncorrected ECC error on GPU 1, a row
remap pending a reset on GPU 2, and has lost GPU 3 (its last report no longer shows it).
"""

from __future__ import annotations

import json

import pytest

from clusters.choices import FindingType
from clusters.models import Finding
from clusters.reconcile import reconcile_all
from inventory.health import GpuProblem
from inventory.models import AgentToken, Gpu
from inventory.services import report_apply, report_receive
from tests.reports import gpu_uuid, make_report
from topology.failure_domains import capacity_after
from topology.placement import fleet_counts, fleet_load, placement_find

from .fleets import k8s_fleet

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
    assert "3 need attention" in page.content.decode()
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
    result = placement_find(cluster="prod", gpus=8)
    assert not result.fits and result.blocked[0].reason == "unhealthy_gpu"
    assert "unhealthy: 1 lost, 1 page retirement or row remap pending a reset, 1 uncorrected" in (
        result.blocked[0].detail
    )
    (chosen,) = placement_find(cluster="prod", gpus=5).nodes
    assert {g.uuid for g in chosen.gpus}.isdisjoint(fleet) and len(chosen.gpus) == 5

    counted = fleet_counts(cluster="prod")
    assert [n.healthy_whole for n in counted.nodes] == [5]
    after = capacity_after(counted, set())
    assert after["clusters"][0]["largest_node_free_before"] == 5


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
