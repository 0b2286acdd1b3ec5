"""POST /api/v1/reports/: auth, token binding, validation, size limit, 202 flow, heartbeat."""

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings

from inventory.models import AgentToken, Gpu, MigDevice, Report, Server
from inventory.services import agent_token_create
from tests.reports import make_report

pytestmark = pytest.mark.django_db


def test_report_is_accepted_applied_and_listed_once_however_often_posted(
    post_report, agent_token, api
):
    report = make_report("dgx-07", mig_gpus={0: ["1g.10gb"] * 7})
    first = post_report(report, agent_token)
    assert first.status_code == 202
    assert first.json()["status"] == "pending" and first.json()["id"] == Report.objects.get().pk
    for _ in range(3):
        again = post_report(report, agent_token)
        assert again.status_code == 202 and again.json()["status"] == "unchanged"
    servers = api.get("/api/v1/servers/").json()
    assert servers["count"] == 1
    row = servers["results"][0]
    assert row["hostname"] == "dgx-07" and row["gpu_count"] == 8
    assert row["mig_device_count"] == 7 and row["state"] == "online"
    assert Report.objects.count() == 1


def test_unknown_token_is_401_and_missing_token_is_401(post_report, client):
    assert post_report(make_report(), "caa_not-a-token").status_code == 401
    response = client.post("/api/v1/reports/", data="{}", content_type="application/json")
    assert response.status_code == 401


def test_human_api_token_cannot_post_reports(post_report, user):
    from inventory.services import user_token_create

    _token, key = user_token_create(user=user)
    assert post_report(make_report(), key).status_code == 401


def test_agent_token_cannot_read_the_inventory(client, agent_token):
    response = client.get("/api/v1/servers/", HTTP_AUTHORIZATION=f"Token {agent_token}")
    assert response.status_code == 401


def test_token_is_bound_to_the_first_server_it_reports(post_report, agent_token):
    assert post_report(make_report("dgx-01"), agent_token).status_code == 202
    response = post_report(make_report("dgx-02"), agent_token)
    assert response.status_code == 403
    assert "bound to another server" in response.json()["errors"]["host"][0]
    assert not Server.objects.filter(hostname="dgx-02").exists()


def test_another_token_cannot_claim_a_bound_server(post_report, agent_token):
    assert post_report(make_report("dgx-01"), agent_token).status_code == 202
    _, other = agent_token_create(name="intruder")
    response = post_report(make_report("dgx-01", gpus=1), other)
    assert response.status_code == 403
    assert Gpu.objects.count() == 8


def test_unbinding_lets_a_new_token_take_the_server(post_report, agent_token):
    from inventory.services import agent_token_unbind

    post_report(make_report("dgx-01"), agent_token)
    agent_token_unbind(token=AgentToken.objects.get(name="test"))
    _, new_key = agent_token_create(name="replacement")
    assert post_report(make_report("dgx-01", gpus=4), new_key).status_code == 202
    assert Server.objects.get().agent_tokens.get().name == "replacement"


def test_malformed_reports_get_field_level_400_and_store_nothing(post_report, agent_token):
    bad = make_report()
    del bad["gpus"][2]["uuid"]
    bad["gpus"][4]["memory_total_bytes"] = "eighty gigs"
    response = post_report(bad, agent_token)
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert "gpus.2.uuid" in errors and "gpus.4.memory_total_bytes" in errors
    assert Report.objects.count() == 0 and Server.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("not json", "body"),
        ("[1, 2]", "body"),
        (json.dumps({"schema": "cluster-atlas/report/v0"}), "schema"),
    ],
)
def test_not_a_report_is_400(post_report, agent_token, body, field):
    response = post_report(body, agent_token)
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_cross_references_are_checked(post_report, agent_token):
    report = make_report(gpus=2)
    report["links"].append({"a": "gpu:0", "b": "gpu:9", "link_class": "NV4"})
    report["links"].append({"a": "gpu:1", "b": "nic:mlx5_9", "link_class": "PIX"})
    report["gpus"][1]["uuid"] = report["gpus"][0]["uuid"]
    last = len(report["links"]) - 1
    response = post_report(report, agent_token)
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors["gpus.1.uuid"] == ["GPU UUID appears twice."]
    assert errors[f"links.{last - 1}.b"] == ["no GPU with index 9 in this report."]
    assert errors[f"links.{last}.b"] == ["no NIC named mlx5_9 in this report."]


def test_oversized_report_is_413(post_report, agent_token, settings):
    report = make_report()
    settings.ATLAS_REPORT_MAX_BYTES = len(json.dumps(report)) - 1
    response = post_report(report, agent_token)
    assert response.status_code == 413
    assert "limit" in response.json()["errors"]["body"][0]
    assert Report.objects.count() == 0


def test_server_without_gpus_or_driver_is_accepted(post_report, agent_token, api):
    report = make_report("login-01", gpus=0, nics=0)
    report["driver"] = None
    report["nvml_error"] = "NVML Shared Library Not Found"
    assert post_report(report, agent_token).status_code == 202
    server = api.get("/api/v1/servers/?search=login").json()["results"][0]
    assert server["gpu_count"] == 0
    detail = api.get(f"/api/v1/servers/{server['id']}/").json()
    assert detail["nvml_error"] == "NVML Shared Library Not Found"


def test_heartbeat_path_is_cheap(post_report, agent_token):
    report = make_report()
    post_report(report, agent_token)
    with CaptureQueriesContext(connection) as ctx:
        assert post_report(report, agent_token).json()["status"] == "unchanged"
    sql = [q["sql"] for q in ctx.captured_queries]
    # One round trip: the UPDATE authenticates the token, matches the hash, marks the server seen.
    assert len(sql) == 1, sql
    assert sql[0].startswith("UPDATE") and "RETURNING" in sql[0]


def test_report_survives_a_failing_enqueue(monkeypatch, post_report, agent_token):
    """Broker away: the answer is still 202 and the report stays pending for the sweep."""
    from inventory import tasks

    def broker_down(report_id):
        raise ConnectionRefusedError("redis is away")

    monkeypatch.setattr(tasks.apply_report, "apply_async", lambda *a, **k: broker_down(0))
    response = post_report(make_report(), agent_token)
    assert response.status_code == 202
    report = Report.objects.get()
    assert report.status == "pending" and Server.objects.count() == 0
    from inventory.tasks import sweep_pending_reports

    with override_settings(ATLAS_PENDING_REPORT_GRACE_S=0):
        assert sweep_pending_reports() == 1
    report.refresh_from_db()
    assert report.status == "applied" and MigDevice.objects.count() == 0
    assert Gpu.objects.count() == 8


def test_a_partial_report_is_said_so_in_the_server_api_and_page(
    post_report, agent_token, api, user
):
    full = make_report("dgx-05")
    assert post_report(full, agent_token).status_code == 202
    partial = {
        "schema": full["schema"],
        "agent": {"version": "0.1.0", "source": "nvidia-smi"},
        "collected_at": "2026-11-30T09:00:00Z",
        "partial": True,
        "partial_reason": "nvidia-smi -L: no bus id, memory or serial",
        "host": {"hostname": "dgx-05", "system_uuid": full["host"]["system_uuid"]},
        "gpus": [{"index": 0, "uuid": full["gpus"][0]["uuid"], "name": full["gpus"][0]["name"]}],
    }
    assert post_report(partial, agent_token).status_code == 202
    server = Server.objects.get()
    detail = api.get(f"/api/v1/servers/{server.pk}/").json()
    assert detail["last_report_partial"] is True
    assert detail["last_report_partial_reason"] == "nvidia-smi -L: no bus id, memory or serial"
    assert detail["gpu_count"] == 8 and detail["lost_gpu_count"] == 0
    assert len(detail["nics"]) == 2 and len(detail["links"]) == 28 + 16

    reader = Client()
    reader.force_login(user)
    page = reader.get(f"/servers/{server.pk}/").content.decode()
    assert 'id="last-report-partial"' in page
    assert "nvidia-smi -L: no bus id, memory or serial" in page

    assert post_report(full, agent_token).status_code == 202  # a full report again
    detail = api.get(f"/api/v1/servers/{server.pk}/").json()
    assert detail["last_report_partial"] is False and detail["last_report_partial_reason"] == ""
    assert 'id="last-report-partial"' not in reader.get(f"/servers/{server.pk}/").content.decode()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"partial": "yes"}, "partial"),
        ({"partial": True, "partial_reason": "x" * 501}, "partial_reason"),
        ({"partial": True, "partial_reason": 7}, "partial_reason"),
    ],
)
def test_a_malformed_partial_flag_is_a_field_level_400(post_report, agent_token, changes, field):
    response = post_report({**make_report(), **changes}, agent_token)
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert Report.objects.count() == 0
