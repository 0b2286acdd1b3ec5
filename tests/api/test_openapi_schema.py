"""The OpenAPI schema says what the API answers: every error status, nullable names, no
two components under one name (schemathesis checks the answers against it: tests/fuzz)."""

from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.fixture(scope="module")
def openapi(tmp_path_factory) -> dict:
    import json

    path = tmp_path_factory.mktemp("schema") / "openapi.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(path), "--fail-on-warn")
    return json.loads(path.read_text())


def test_every_operation_documents_its_error_answers(openapi):
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert {"400", "401", "403", "404"} <= codes, (method, path, codes)
            if method in ("post", "put", "patch"):
                assert "415" in codes, (method, path)


def test_snapshot_answers_and_the_status_url_are_documented(openapi):
    post = openapi["paths"]["/api/v1/clusters/{name}/snapshots/"]["post"]
    assert {"201", "202", "400", "413"} <= set(post["responses"])
    assert "/api/v1/clusters/{name}/snapshots/{id}/" in openapi["paths"]


def test_names_that_may_be_missing_are_nullable_and_components_are_unique(openapi):
    schemas = openapi["components"]["schemas"]
    for field in ("server_hostname", "node_name", "cluster_name"):
        assert schemas["Finding"]["properties"][field].get("nullable"), field
    assert schemas["Node"]["properties"]["server_hostname"].get("nullable")
    assert "InterconnectLink" in schemas and "Link" in schemas


def test_the_finding_type_enum_lists_every_finding_type(openapi):
    """Every FindingType value, fabric and health ones too, in the findings' `type` (and in
    the `?type=` filter of the findings list)."""
    from findings.choices import FindingType

    schemas = openapi["components"]["schemas"]
    prop = schemas["Finding"]["properties"]["type"]
    refs = [prop.get("$ref")] + [p.get("$ref") for p in prop.get("allOf", [])]
    ref = next(r for r in refs if r)
    enum = schemas[ref.rsplit("/", 1)[1]]["enum"]
    assert sorted(enum) == sorted(FindingType.values)
    assert "fabric_link_degraded" in enum
    params = openapi["paths"]["/api/v1/findings/"]["get"]["parameters"]
    (type_param,) = [p for p in params if p["name"] == "type"]
    schema = type_param["schema"]
    listed = schema.get("enum") or schema.get("items", {}).get("enum")
    assert sorted(listed) == sorted(FindingType.values)
