"""One vocabulary for every family's findings: the API's `?type=` filter, the findings page
and the model's own validation know every type the writers raise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from fabric.findings import fabric_findings_sync
from fabric.models import Fabric
from fabric.services import fabric_snapshot_ingest
from fabric.synthetic import synthetic_fabric
from findings.choices import SEVERITY_ORDER, Family, FindingType, Severity
from findings.facts import FindingFact
from findings.models import Finding
from findings.services import findings_write
from health.services import health_findings_sync, health_sweep
from tests.fabric.conftest import without_cable
from tests.health.fleet import Agent, server_report, with_events, xid
from tests.nodes import k8s_node, k8s_node_list
from tests.reports import apply_reports, gpu_uuid, make_report

pytestmark = pytest.mark.django_db

EVERY_TYPE = list(FindingType)


def _finding(type_: str, n: int = 0) -> Finding:
    return Finding.objects.create(
        type=type_, severity=Severity.WARNING, subject=f"{type_}:{n}", message=f"about {type_}"
    )


def test_every_type_has_a_family_and_words_of_its_own():
    assert {t.family for t in FindingType} == set(Family)
    assert sorted(t for f in Family for t in FindingType.of_family(f)) == sorted(FindingType.values)
    labels = [str(t.label) for t in FindingType]
    assert len(set(labels)) == len(labels)
    assert not [t for t in FindingType if str(t.label) in (t.value, t.name.title())]


def test_severities_are_palette_tones_worst_first():
    from core.palette import TONES

    assert set(Severity.values) <= set(TONES)
    assert SEVERITY_ORDER == ("critical", "warning", "info")


@pytest.mark.parametrize("finding_type", EVERY_TYPE, ids=str)
def test_the_api_filters_by_every_type_of_every_family(api, finding_type):
    wanted = _finding(finding_type)
    _finding(FindingType.DRIVER_SKEW if finding_type != FindingType.DRIVER_SKEW else "stale_agent")
    response = api.get("/api/v1/findings/", {"type": finding_type})
    assert response.status_code == 200, response.content
    assert [f["id"] for f in response.json()["results"]] == [wanted.pk]


def test_an_unknown_type_is_still_a_400(api):
    response = api.get("/api/v1/findings/", {"type": "no_such_type"})
    assert response.status_code == 400 and "type" in response.json()


def test_the_findings_page_names_every_type_in_words(client, user):
    for n, finding_type in enumerate(EVERY_TYPE):
        _finding(finding_type, n)
    client.force_login(user)
    page = client.get("/findings/", {"page_size": 100}).content.decode()
    for finding_type in EVERY_TYPE:
        assert escape(str(finding_type.label)) in page, finding_type
    # and the type filter offers every one of them
    for finding_type in EVERY_TYPE:
        assert f'value="{finding_type}"' in page, finding_type


@pytest.mark.parametrize("finding_type", [t for t in EVERY_TYPE if t.family != "reconciliation"])
def test_a_finding_page_of_another_family_shows_its_words(client, user, finding_type):
    finding = _finding(finding_type)
    client.force_login(user)
    page = client.get(f"/findings/{finding.pk}/").content.decode()
    assert "<h1>" in page and escape(str(finding_type.label)) in page


def test_every_finding_the_writers_write_passes_full_clean():
    """A reconcile pass, a health pass with a fatal Xid, a fabric pass with a port gone, on one
    small fleet: every row they leave is valid by the model's own rules."""
    # Reconciliation: a node nobody reports, and a server in no scheduler.
    apply_reports(make_report("dgx-01"))
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("ghost", system_uuid="abc")))
    reconcile_all()
    # Health: a fatal Xid on a GPU of a server.
    bus = "0000:38:00.0"
    report = server_report("dgx-02")
    Agent("dgx-02").send(
        with_events(report, xid(79, bus, "2026-11-30T08:00:00Z", uuid=gpu_uuid("dgx-02", 2)))
    )
    health_sweep()
    health_findings_sync(now=datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
    # Fabric: a cable gone since the last snapshot.
    built = synthetic_fabric(servers=8, rails=2, servers_per_leaf=4)
    fabric_snapshot_ingest(fabric_name="f", raw=built.text)
    fabric_snapshot_ingest(fabric_name="f", raw=without_cable(built.text, "gpu00003 mlx5_0"))
    fabric_findings_sync(fabric=Fabric.objects.get(name="f"))

    written = {f.type for f in Finding.objects.all()}
    assert {
        FindingType.NODE_WITHOUT_SERVER,
        FindingType.SERVER_WITHOUT_NODE,
        FindingType.GPU_FATAL_XID,
        FindingType.FABRIC_PORT_GONE,
    } <= written
    for finding in Finding.objects.all():
        finding.full_clean()


def _fact(type_: str, subject: str) -> FindingFact:
    return FindingFact(type=type_, severity=Severity.WARNING, subject=subject, message="m")


def test_a_writer_resolves_only_its_own_family():
    now = timezone.now()
    findings_write(
        desired={f.key: f for f in [_fact("stale_agent", "node:1")]},
        now=now,
        family=Family.RECONCILIATION,
    )
    findings_write(
        desired={f.key: f for f in [_fact("gpu_fatal_xid", "gpu:1")]},
        now=now,
        family=Family.HEALTH,
    )
    later = now + timedelta(minutes=1)
    assert findings_write(desired={}, now=later, family=Family.FABRIC) == (0, 0, 0)
    assert findings_write(desired={}, now=later, family=Family.HEALTH) == (0, 1, 0)
    still = Finding.objects.get(type="stale_agent")
    assert still.resolved_at is None


def test_a_writer_refuses_a_fact_of_another_family():
    with pytest.raises(ValueError, match="gpu_fatal_xid"):
        findings_write(
            desired={("gpu_fatal_xid", "gpu:1"): _fact("gpu_fatal_xid", "gpu:1")},
            now=timezone.now(),
            family=Family.FABRIC,
        )
    assert not Finding.objects.exists()
