"""Per-server placement summaries: the answers read from them are the answers read from the
rows, on a fleet that mixes NVLink and PCIe servers, MIG, unhealthy, lost and drained GPUs, a
server in two schedulers and a GPU needing action; a changed report makes a summary stale
(its server is read from the rows until it is rebuilt)."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from inventory.models import AgentToken, Gpu, Server
from inventory.services import report_apply, report_receive
from placement import selectors
from placement.models import ServerPlacement
from placement.selectors import fleet_load
from placement.summaries import placement_summaries_refresh, stale_servers, summary_of
from tests.nodes import scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report

from .fleets import fatal_xid, k8s_fleet, pcie_report, placement_answers

pytestmark = pytest.mark.django_db

REQUESTS = [
    {"gpus": 16},
    {"gpus": 4},
    {"cluster": "prod", "gpus": 4},
    {"cluster": "prod", "gpus": 9},
    {"cluster": "hpc", "nodes": 2, "gpus_per_node": 8},
    {"cluster": "hpc", "gpus": 12, "nvlink_only": True},
    {"gpus": 2, "same_numa": True},
    {"gpus": 4, "model": "L40S"},
    {"gpus": 2, "mig_profile": "1g.10gb"},
    {"gpus": 8, "min_gpu_memory_bytes": 80 * 2**30},
    {"cluster": "prod", "gpus": 8},
]


def _sick(hostname: str) -> dict:
    report = make_report(hostname, skip_gpus=(7,))
    for gpu in report["gpus"]:
        gpu.update(ecc_errors_uncorrected=0, remapped_rows_failure=False)
    report["gpus"][1]["ecc_errors_uncorrected"] = 3
    return report


@pytest.fixture
def fleet():
    k8s_fleet(
        [
            make_report("dgx-01"),
            make_report("dgx-02"),
            make_report("mig-01", mig_gpus={0: ["1g.10gb", "1g.10gb"], 1: ["3g.40gb"]}),
            pcie_report("pcie-01", [[0, 1], [2, 3]]),
        ]
    )
    apply_reports(
        make_report("dgx-03"),
        make_report("dgx-04"),
        pcie_report("pcie-02", [[0, 1, 2, 3], [4, 5]]),
        make_report("sick-01"),
    )
    names = ["dgx-02", "dgx-03", "dgx-04", "pcie-02", "sick-01"]
    snapshot_ingest(cluster_name="hpc", raw=scontrol_text(*(scontrol_node(n) for n in names)))
    token = AgentToken.objects.get(name="sick-01")
    body = json.dumps(_sick("sick-01")).encode()
    report_apply(report_id=report_receive(token=token, body=body).report_id)
    reconcile_all()
    fatal_xid("dgx-03", 5)


def _answers() -> dict:
    return placement_answers(REQUESTS)


def test_answers_from_summaries_are_the_answers_from_rows(fleet):
    from_rows = _answers()
    assert fleet_load().summarized == 0
    assert placement_summaries_refresh() == Server.objects.count() == 8
    assert fleet_load(with_mig=True).summarized == 8
    assert _answers() == from_rows
    assert any(not a["fits"] for k, a in from_rows.items() if k.startswith("{"))
    # dgx-03's GPU 5 (a fatal Xid), and every working GPU of sick-01, whose unhealthy GPUs
    # raise a critical finding about the server (health.action)
    sick = Gpu.objects.filter(server__hostname="sick-01").exclude(status="lost").count()
    assert from_rows[json.dumps({"gpus": 16})]["gpus_needing_action"] == 1 + sick


def test_a_changed_report_makes_its_summary_stale_until_rebuilt(fleet, monkeypatch):
    call_command("placement_summaries")
    assert list(stale_servers()) == []
    token = AgentToken.objects.get(name="dgx-04")
    changed = make_report("dgx-04", skip_gpus=(0, 1, 2))
    report_apply(report_id=report_receive(token=token, body=json.dumps(changed).encode()).report_id)
    dgx04 = Server.objects.get(hostname="dgx-04")
    assert list(stale_servers()) == [dgx04.pk]
    assert fleet_load().summarized == 7
    with_stale = _answers()
    monkeypatch.setattr(selectors, "IN_LIST_LIMIT", 0)  # many stale servers: read by subquery
    assert _answers() == with_stale
    ServerPlacement.objects.all().delete()
    assert _answers() == with_stale  # the stale server was read from its rows
    assert placement_summaries_refresh() == 8
    assert _answers() == with_stale
    assert placement_summaries_refresh() == 0  # nothing stale: nothing rebuilt


def test_a_summary_counts_usable_and_known_gpus_in_index_order():
    gpus = [(12, 1, "H100", 80, 0, 0), (11, 0, "H100", 80, 0, 1), (13, 2, "H100", 80, 1, 2)]
    built = summary_of(gpus, {"NV18"}, {}, [("MIG-1", 11, "1g.10gb", 10)])
    assert json.loads(built["gpus"])[0][0] == 11
    assert (built["usable"], built["known"]) == (1, 2)  # MIG and lost are not usable
    assert built["links"] == "NV18"
    mixed = summary_of(gpus, {"PIX", "SYS"}, {(11, 12): "PIX", (11, 13): "SYS"}, [])
    assert json.loads(mixed["links"])["pairs"] == [[11, 12, "PIX"], [11, 13, "SYS"]]


def test_a_summary_shape_is_published_on_its_server_only_while_its_facts_hold(fleet, monkeypatch):
    """The reads group servers by `Server.placement_shape`: applying a changed report empties
    it, a rebuild publishes it, and a report applied while a rebuild runs is not covered by
    the shape the rebuild computed from the facts before it."""
    from placement import summaries

    call_command("placement_summaries")
    dgx04 = Server.objects.get(hostname="dgx-04")
    assert dgx04.placement_shape == ServerPlacement.objects.get(server=dgx04).shape != ""
    token = AgentToken.objects.get(name="dgx-04")
    changed = make_report("dgx-04", skip_gpus=(0, 1, 2))
    report_apply(report_id=report_receive(token=token, body=json.dumps(changed).encode()).report_id)
    dgx04.refresh_from_db()
    assert dgx04.placement_shape == ""
    built = summaries.summary_of

    def applied_meanwhile(*args):
        Server.objects.filter(pk=dgx04.pk).update(last_report_hash="newer", placement_shape="")
        return built(*args)

    monkeypatch.setattr(summaries, "summary_of", applied_meanwhile)
    assert placement_summaries_refresh(server_ids=[dgx04.pk]) == 1
    dgx04.refresh_from_db()
    assert dgx04.placement_shape == ""  # built from the facts before "newer": not published
    assert list(stale_servers()) == [dgx04.pk]
    monkeypatch.setattr(summaries, "summary_of", built)
    assert placement_summaries_refresh() == 1
    dgx04.refresh_from_db()
    assert dgx04.placement_shape == ServerPlacement.objects.get(server=dgx04).shape != ""
    assert dgx04.placement_shape[0] == "g"  # some GPU known: labels are not read for it
