"""The health API: events with their filters and catalog meaning, a GPU's history, both in the
OpenAPI schema; bad filters are field-level 400s; lists cost a fixed number of queries."""

from __future__ import annotations

import copy

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from health.services import health_sweep
from inventory.models import Gpu, Server
from tests.reports import gpu_uuid

from .fleet import Agent, server_report, with_events, xid

pytestmark = pytest.mark.django_db

BUS2 = "0000:38:00.0"
EVENT_FIELDS = {
    "id",
    "kind",
    "code",
    "server",
    "gpu",
    "gpu_serial",
    "pci_bus_id",
    "first_seen",
    "last_seen",
    "count",
    "severity",
    "action",
    "message",
}


@pytest.fixture
def fleet():
    for name in ("dgx-01", "dgx-02"):
        Agent(name).send(
            with_events(
                server_report(name),
                xid(79, BUS2, "2026-11-30T08:00:00Z", uuid=gpu_uuid(name, 2)),
                xid(13, BUS2, "2026-11-29T08:00:00Z", count=7, uuid=gpu_uuid(name, 2)),
                xid(
                    12028,
                    "0000:05:00.0",
                    "2026-11-30T09:00:00Z",
                    kind="sxid",
                    message="Non-fatal, <script>alert(1)</script>",
                ),
            )
        )
    health_sweep()
    return {s.hostname: s for s in Server.objects.all()}


def test_events_list_carries_the_contract_fields_and_the_catalog_meaning(api, fleet):
    response = api.get("/api/v1/health-events/")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 6 and {"next", "previous", "results"} <= set(body)
    first = body["results"][0]
    assert set(first) >= EVENT_FIELDS
    xid79 = next(e for e in body["results"] if e["code"] == 79)
    assert xid79["meaning"] == "GPU has fallen off the bus" and xid79["severity"] == "critical"
    assert xid79["gpu"] == Gpu.objects.get(uuid=xid79["gpu_uuid"]).pk
    sxid = next(e for e in body["results"] if e["kind"] == "sxid")
    assert sxid["gpu"] is None and sxid["message"] == "Non-fatal, <script>alert(1)</script>"
    assert response["Content-Type"] == "application/json"  # data, never markup


@pytest.mark.parametrize(
    "query, expected",
    [
        ("code=79", {79}),
        ("kind=sxid", {12028}),
        ("severity=warning", {13, 12028}),
        ("since=2026-11-30T00:00:00Z", {79, 12028}),
    ],
)
def test_events_filter_by_code_kind_severity_and_since(api, fleet, query, expected):
    results = api.get(f"/api/v1/health-events/?{query}").json()["results"]
    assert {e["code"] for e in results} == expected


def test_events_filter_by_server_and_gpu(api, fleet):
    server = fleet["dgx-02"]
    by_server = api.get(f"/api/v1/health-events/?server={server.pk}").json()["results"]
    assert {e["server"] for e in by_server} == {server.pk} and len(by_server) == 3
    gpu = Gpu.objects.get(uuid=gpu_uuid("dgx-02", 2))
    by_gpu = api.get(f"/api/v1/health-events/?gpu={gpu.pk}").json()["results"]
    assert sorted(e["code"] for e in by_gpu) == [13, 79]


@pytest.mark.parametrize(
    "query, field",
    [
        ("since=yesterday", "since"),
        ("code=abc", "code"),
        ("code=-4", "code"),
        ("server=x", "server"),
        ("kind=ecc", "kind"),
        ("severity=fatal", "severity"),
    ],
)
def test_bad_filters_are_field_level_400s(api, fleet, query, field):
    response = api.get(f"/api/v1/health-events/?{query}")
    assert response.status_code == 400
    assert field in response.json()


def test_anonymous_callers_get_401():
    assert APIClient().get("/api/v1/health-events/").status_code == 401
    assert APIClient().get("/api/v1/gpus/1/history/").status_code == 401


def test_the_event_list_costs_the_same_queries_for_many_events(api, fleet):
    with CaptureQueriesContext(connection) as few:
        api.get("/api/v1/health-events/?page_size=2")
    with CaptureQueriesContext(connection) as many:
        api.get("/api/v1/health-events/?page_size=1000")
    assert len(few) == len(many)


def test_gpu_history_of_a_replaced_slot(api, fleet):
    agent = Agent("dgx-03")
    report = server_report("dgx-03")
    agent.send(report)
    swapped = copy.deepcopy(report)
    swapped["gpus"][1]["uuid"] = "GPU-00000000-0000-4000-8000-0000000000ab"
    swapped["gpus"][1]["serial"] = "4242424242"
    agent.send(
        with_events(
            swapped,
            xid(
                48,
                swapped["gpus"][1]["pci_bus_id"],
                "2026-11-30T10:00:00Z",
                uuid=swapped["gpus"][1]["uuid"],
            ),
        )
    )
    health_sweep()
    gpu = Gpu.objects.get(uuid="GPU-00000000-0000-4000-8000-0000000000ab")
    response = api.get(f"/api/v1/gpus/{gpu.pk}/history/")
    assert response.status_code == 200
    body = response.json()
    assert body["gpu"]["id"] == gpu.pk and body["identity"] == "serial:4242424242"
    assert [o["serial"] for o in body["slot"]["occupants"]] == [
        report["gpus"][1]["serial"],
        "4242424242",
    ]
    assert body["replacements"][0]["role"] == "installed"
    assert [e["code"] for e in body["events"]] == [48]
    assert body["placements"][-1]["hostname"] == "dgx-03" and body["placements"][-1]["end"] is None
    assert body["counters"] and "ecc_aggregate_corrected" in body["counters"][0]


def test_history_of_an_unknown_gpu_is_404(api, fleet):
    assert api.get("/api/v1/gpus/999999/history/").status_code == 404


def test_both_endpoints_are_in_the_openapi_schema(api):
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    assert "/api/v1/health-events/" in schema["paths"]
    assert "/api/v1/gpus/{id}/history/" in schema["paths"]
    event = schema["components"]["schemas"]["HealthEvent"]["properties"]
    assert set(event) >= EVENT_FIELDS
    history = schema["components"]["schemas"]["GpuHistory"]["properties"]
    assert {"placements", "replacements", "slot", "events", "counters"} <= set(history)
    params = {p["name"] for p in schema["paths"]["/api/v1/health-events/"]["get"]["parameters"]}
    assert {"server", "gpu", "code", "kind", "since", "severity"} <= params
