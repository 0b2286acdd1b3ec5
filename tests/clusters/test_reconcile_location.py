"""Reconciliation raises and resolves the location findings: an IP address on several live
servers, servers overlapping in a rack; a pass of changes judges them again at a cost that does
not grow with the fleet."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.reconcile import reconcile_all
from findings.choices import FindingType
from findings.models import Finding
from inventory.models import Server
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def open_findings(type_: str) -> list[Finding]:
    return list(Finding.objects.filter(type=type_, resolved_at__isnull=True).order_by("subject"))


def offline_ago() -> datetime:
    return timezone.now() - timedelta(seconds=settings.ATLAS_SERVER_OFFLINE_AFTER_S + 60)


def test_an_address_on_two_live_servers_is_raised_and_resolves_when_one_goes_offline():
    apply_reports(
        make_report("dgx-01", addresses=["10.1.0.1/16", "172.17.0.1/16"]),
        make_report("dgx-02", addresses=["10.1.0.1/16", "172.17.0.1/16"]),
        make_report("dgx-03", addresses=["10.1.0.3/16", "172.17.0.1/16"]),
    )
    reconcile_all()
    (found,) = open_findings(FindingType.IP_ADDRESS_DUPLICATE)
    assert found.subject == "address:10.1.0.1"
    assert found.server.hostname == "dgx-01"
    assert found.details["servers"] == ["dgx-01", "dgx-02"]

    Server.objects.filter(hostname="dgx-02").update(last_seen=offline_ago())
    result = reconcile_all()
    assert not result.full  # an age changed, no identity
    assert open_findings(FindingType.IP_ADDRESS_DUPLICATE) == []
    found.refresh_from_db()
    assert found.resolved_at is not None

    Server.objects.filter(hostname="dgx-02").update(last_seen=timezone.now())
    assert not reconcile_all().full
    assert [f.subject for f in open_findings(FindingType.IP_ADDRESS_DUPLICATE)] == [
        "address:10.1.0.1"
    ]

    Server.objects.filter(hostname="dgx-02").update(addresses=["10.1.0.2/16"])
    assert reconcile_all().full  # addresses are identity: they bind nodes
    assert open_findings(FindingType.IP_ADDRESS_DUPLICATE) == []


def test_a_server_moved_into_occupied_units_is_raised_and_resolves_when_it_moves_out():
    servers = apply_reports(make_report("dgx-01"), make_report("dgx-02"))  # DGXH100: 8U
    Server.objects.filter(hostname="dgx-01").update(rack="R1", rack_position=1)
    Server.objects.filter(hostname="dgx-02").update(rack="R1", rack_position=9)
    reconcile_all()
    assert open_findings(FindingType.RACK_UNITS_OVERLAP) == []

    Server.objects.filter(hostname="dgx-02").update(rack_position=5)
    result = reconcile_all()
    assert not result.full and result.findings_raised == 1
    (found,) = open_findings(FindingType.RACK_UNITS_OVERLAP)
    low, high = sorted((servers["dgx-01"].id, servers["dgx-02"].id))
    assert found.subject == f"server:{low}:overlaps:{high}"
    assert found.message.startswith(
        "rack R1: dgx-01 (U1-U8, 8U) and dgx-02 (U5-U12, 8U) overlap at U5-U8"
    )

    Server.objects.filter(hostname="dgx-02").update(rack="R2")
    result = reconcile_all()
    assert not result.full and result.findings_resolved == 1
    assert open_findings(FindingType.RACK_UNITS_OVERLAP) == []


def test_a_pass_judging_the_fleets_addresses_and_racks_again_costs_the_same_at_5_and_40():
    def run(count: int, offset: int) -> int:
        hosts = [f"dgx-{offset + i:03d}" for i in range(count)]
        apply_reports(*(make_report(h, gpus=1, nics=0) for h in hosts))
        Server.objects.filter(hostname__in=hosts).update(rack=f"R{offset}", rack_position=None)
        reconcile_all()
        Server.objects.filter(hostname=hosts[1]).update(rack_position=1)
        Server.objects.filter(hostname=hosts[2]).update(rack_position=3)
        with CaptureQueriesContext(connection) as ctx:
            result = reconcile_all()
        assert not result.full and result.findings_raised == 1
        return len(ctx.captured_queries)

    reconcile_all()  # the first run creates its state row
    assert run(5, 0) == run(40, 100)
