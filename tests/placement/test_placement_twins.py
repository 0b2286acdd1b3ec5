"""Nodes alike stand as one with their twins (`selectors.group_nodes`): the answers are the answers
planned node by node (`selectors.TWINS` off), on a fleet of many alike servers with the few that
differ (busy GPUs, a drained node, a critical finding, a GPU needing action, servers in two
schedulers, PCIe and MIG servers, a stale summary)."""

from __future__ import annotations

import json

import pytest

from clusters.models import Node
from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from findings.models import Finding
from inventory.models import Gpu, MigDevice, Server
from placement import selectors
from placement.selectors import fleet_load
from placement.service import placement_find
from placement.summaries import placement_summaries_refresh
from tests.nodes import k8s_node, scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report

from .fleets import fatal_xid, k8s_fleet, pcie_report, placement_answers

pytestmark = pytest.mark.django_db

REQUESTS = [
    {"gpus": 16},
    {"gpus": 40},
    {"gpus": 200},
    {"cluster": "prod", "gpus": 4},
    {"cluster": "prod", "gpus": 9},
    {"cluster": "prod", "nodes": 3, "gpus_per_node": 8},
    {"cluster": "prod", "nodes": 30, "gpus_per_node": 1},
    {"cluster": "prod", "nodes": 12, "gpus_per_node": 8},
    {"cluster": "prod", "nodes": 12, "gpus_per_node": 8, "mix_models": True},
    {"cluster": "prod", "gpus": 4, "mig_profile": "1g"},
    {"cluster": "hpc", "nodes": 2, "gpus_per_node": 8},
    {"cluster": "hpc", "gpus": 12, "nvlink_only": True},
    {"gpus": 2, "same_numa": True},
    {"gpus": 4, "model": "L40S"},
    {"gpus": 2, "mig_profile": "1g.10gb"},
    {"cluster": "prod", "gpus": 3, "mig_profile": "1g.10gb"},
    {"gpus": 8, "min_gpu_memory_bytes": 80 * 2**30},
    {"scheduler": "slurm", "gpus": 24},
]
GRES = {"name": "gpu", "type": "h100", "count": 8}


@pytest.fixture
def fleet():
    dgx = [make_report(f"dgx-{i:02d}") for i in range(24)]
    reports = [
        *dgx[:16],
        *(pcie_report(f"pcie-{i}", [[0, 1], [2, 3]]) for i in range(3)),
        *(make_report(f"mig-{i}", mig_gpus={0: ["1g.10gb", "1g.10gb"]}) for i in range(2)),
    ]
    k8s_fleet(
        reports,
        nodes=[
            k8s_node(
                r["host"]["hostname"],
                system_uuid=r["host"]["system_uuid"],
                gpus=7 if r["host"]["hostname"].startswith("mig") else 8,
                extra_resources=(
                    {"nvidia.com/mig-1g.10gb": 2} if r["host"]["hostname"].startswith("mig") else {}
                ),
            )
            for r in reports
        ],
    )
    apply_reports(*dgx[16:])
    hpc = [f"dgx-{i:02d}" for i in range(12, 24)]  # dgx-12..15 in both schedulers
    snapshot_ingest(cluster_name="hpc", raw=scontrol_text(*(scontrol_node(n) for n in hpc)))
    reconcile_all()
    Node.objects.filter(cluster__name="prod", name__in=["dgx-00", "dgx-01"]).update(gpu_used=4)
    Node.objects.filter(cluster__name="prod", name="dgx-13").update(gpu_used=2)
    Node.objects.filter(cluster__name="hpc", name="dgx-12").update(
        gres=[{**GRES, "used": 3, "used_indexes": "0-2"}]
    )
    Node.objects.filter(cluster__name="hpc", name="dgx-17").update(
        gres=[{**GRES, "used": 8, "used_indexes": "0-7"}]
    )
    Node.objects.filter(cluster__name="hpc", name="dgx-19").update(
        schedulable=False, state_flags=["drain"], reason="maintenance"
    )
    fatal_xid("dgx-02", 3)
    troubled = Server.objects.get(hostname="dgx-18")
    Finding.objects.create(
        type="server_gpu_count_mismatch",
        severity="critical",
        subject=f"count:{troubled.pk}",
        message="dgx-18: 7 of 8 GPUs",
        server=troubled,
    )
    assert placement_summaries_refresh() == Server.objects.count()
    stale = Server.objects.get(hostname="dgx-15")  # its summary no longer fresh
    stale.last_report_hash, stale.placement_shape = "changed", ""  # as applying a report does
    stale.save(update_fields=["last_report_hash", "placement_shape"])


def _answers() -> dict:
    return placement_answers(REQUESTS)


def test_nodes_alike_give_the_answers_planned_node_by_node(fleet, monkeypatch):
    nodes = Node.objects.filter(gone_at__isnull=True).count()
    grouped = fleet_load().nodes
    assert len(grouped) < nodes - 15  # the twins are many
    assert sum(n.weight for n in grouped) == nodes
    twins = _answers()
    monkeypatch.setattr(selectors, "TWINS", False)
    assert len(fleet_load().nodes) == nodes
    assert _answers() == twins
    assert not twins[json.dumps({"cluster": "prod", "nodes": 30, "gpus_per_node": 1})]["fits"]
    # 11 H100 nodes have 8 free: the twelfth would be an L40S, only when mixing is asked
    twelve = twins[json.dumps({"cluster": "prod", "nodes": 12, "gpus_per_node": 8})]
    assert not twelve["fits"] and "fits only by mixing GPU models" in twelve["reason"]
    mixed = {"cluster": "prod", "nodes": 12, "gpus_per_node": 8, "mix_models": True}
    assert twins[json.dumps(mixed)]["fits"] and len(twins[json.dumps(mixed)]["models"]) == 2
    assert len({n["node"] for n in twins[json.dumps(mixed)]["nodes"]}) == 12
    assert twins[json.dumps({"gpus": 16})]["fits"]


def test_an_answer_on_twins_names_each_twin_with_its_own_gpus(fleet):
    """The planner worked on the stand-in's GPUs: each chosen twin's own UUIDs come back."""
    result = placement_find(cluster="prod", nodes=3, gpus_per_node=8)
    assert result.fits
    for choice in result.nodes + result.candidates:
        own = {
            u for u in Gpu.objects.filter(server_id=choice.server).values_list("uuid", flat=True)
        }
        assert {g.uuid for g in choice.gpus} <= own and len(choice.gpus) == choice.gpu_count
    mig = placement_find(cluster="prod", gpus=2, mig_profile="1g.10gb")
    answered = mig.nodes + mig.candidates
    assert mig.fits and {c.node for c in answered} == {"mig-0", "mig-1"}  # mig-1: a twin
    for choice in answered:
        own = set(
            MigDevice.objects.filter(gpu__server_id=choice.server).values_list("uuid", flat=True)
        )
        assert len(choice.gpus) == 2 and {g.mig_uuid for g in choice.gpus} <= own
