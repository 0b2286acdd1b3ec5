"""Every bad input measured in the fuzzing (issue 9) gets a field-level 400, never a 500, and
never a 202 that fails in the worker. One test per cause."""

from __future__ import annotations

import json

import pytest

from inventory.models import Report, Server
from tests.reports import make_report

pytestmark = pytest.mark.django_db


def report_with(path: str, value) -> dict:
    report = make_report("dgx-bad", gpus=2, nics=1)
    target = report
    *parents, last = path.split(".")
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[int(last) if last.isdigit() else last] = value
    return report


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("host.cpu_cores", 2**31),  # an int column
        ("host.memory_total_bytes", 10**20),  # a bigint column
        ("gpus.0.ecc_errors_corrected", 10**40),
        (
            "gpus.0.mig_devices",
            [{"uuid": "MIG-x", "gpu_instance_id": 2**31, "compute_instance_id": 0}],
        ),
        ("host.hostname", "h" * 254),
        ("gpus.0.compute_capability", "9" * 17),  # a 16-character column
        ("nics.0.state", "u" * 33),
        ("gpus.0.power_limit_w", 1e300),
    ],
)
def test_values_beyond_their_column_are_400_naming_the_field(post_report, agent_token, path, value):
    response = post_report(report_with(path, value), agent_token)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert any(key.startswith(path) for key in errors), errors
    assert not Report.objects.exists() and not Server.objects.exists()


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (
            json.dumps(report_with("host.hostname", "dgx\x00-01")),
            "host.hostname",
            "NUL character",
        ),
        (json.dumps(report_with("gpus.1.name", "H100 \ud800")), "gpus.1.name", "surrogate"),
        (json.dumps(report_with("gpus.0.power_limit_w", float("nan"))), "body", "RFC 8259"),
        (json.dumps(report_with("gpus.0.power_limit_w", float("inf"))), "body", "RFC 8259"),
        ('{"gpus": ' + "[" * 100_000 + "]" * 100_000 + "}", "body", "deeper than 64"),
        ('{"gpus": ' + "[" * 100_000, "body", "deeper than 64"),
        (b'{"host": {"hostname": "\xff"}}', "body", "not UTF-8"),
    ],
)
def test_strings_and_json_outside_rfc_8259_are_400(post_report, agent_token, body, field, words):
    response = post_report(body, agent_token)
    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()["errors"][field])
    assert not Report.objects.exists()


def test_a_report_at_the_column_limits_is_accepted_and_applied(post_report, agent_token):
    report = report_with("host.cpu_cores", 2**31 - 1)
    report["host"]["memory_total_bytes"] = 2**63 - 1
    report["gpus"][0]["ecc_errors_corrected"] = 2**63 - 1
    report["host"]["hostname"] = "h" * 253
    response = post_report(report, agent_token)
    assert response.status_code == 202, response.content
    assert Report.objects.get().status == "applied", Report.objects.get().error
    assert Server.objects.get().cpu_cores == 2**31 - 1


def test_every_json_body_of_the_api_goes_through_the_strict_parser(staff):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(staff)
    server = Server.objects.create(identity="hostname:x", hostname="x")
    deep = '{"rack": ' + "[" * 50_000 + "]" * 50_000 + "}"
    for body in ('{"rack": NaN}', deep, '{"rack": "r\\u0000"}', '{"rack": "\\udc00"}'):
        response = client.generic(
            "PATCH", f"/api/v1/servers/{server.pk}/", body, content_type="application/json"
        )
        assert response.status_code == 400, (body[:40], response.content)
        assert response.json()["detail"] == "malformed JSON" and response.json()["errors"]
    response = client.generic(
        "POST", "/api/v1/clusters/", '{"name": "a\\u0000b", "kind": "slurm"}', "application/json"
    )
    assert response.json()["errors"] == {"name": ["a NUL character is not allowed in a string"]}


@pytest.mark.parametrize("path", ["/api/v1/nodes/null/binding/", "/api/v1/nodes/1e3/binding/"])
def test_a_node_id_that_is_not_a_number_is_404(staff, path):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(staff)
    assert client.post(path, {"server": None}, format="json").status_code == 404
    assert client.get("/api/v1/findings/null/").status_code == 404
    assert client.post("/api/v1/nodes/99999999999999999999/binding/", {}).status_code == 404
