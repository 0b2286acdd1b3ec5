"""Schemathesis over the OpenAPI schema, as a reader, as staff and as an agent.

Every operation, with generated (valid and invalid) parameters and bodies, must answer
without a server error, with a status code the schema documents, and with a body that
matches the schema for that status. Requests go through Django's WSGI application in this
process, so the test database and its transaction are the ones the views use.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import FUZZ_EXAMPLES, SURVEY, TALLY, examples

pytestmark = [pytest.mark.django_db, pytest.mark.fuzz]

CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]


def _openapi() -> dict:
    """The schema exactly as /api/schema/ serves it (generated here: no server, no login)."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document))


def _wsgi_app():
    from django.core.wsgi import get_wsgi_application

    return get_wsgi_application()


def _schema(*, coverage: bool):
    """The schema to fuzz, with or without schemathesis's coverage phase.

    The coverage phase (every boundary value of every parameter, every undocumented method)
    is most of the tier's time. CI runs it for the roles that can reach every handler (staff)
    and every agent endpoint (the agent); the reader's run checks what a read-only caller is
    refused with generated examples alone. ATLAS_FUZZ_EXAMPLES (a longer run) covers all roles.
    """
    loaded = schemathesis.openapi.from_dict(_openapi())
    loaded.app = _wsgi_app()
    loaded.config.generation.update(max_examples=examples(5))
    loaded.config.phases.coverage.enabled = coverage
    return loaded


schema = _schema(coverage=True)
reader_schema = schema if FUZZ_EXAMPLES else _schema(coverage=False)


@pytest.fixture
def in_test_transaction():
    """Keep the test's connection open across requests, as Django's test client does."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def tokens(fleet, django_user_model):
    from inventory.services import agent_token_create, user_token_create

    reader = django_user_model.objects.create_user("fuzz-reader", password="x" * 12)
    staff = django_user_model.objects.create_user("fuzz-staff", password="x" * 12, is_staff=True)
    return {
        "user": user_token_create(user=reader)[1],
        "staff": user_token_create(user=staff)[1],
        "agent": agent_token_create(name="fuzz")[1],
    }


def _call(case, key: str) -> None:
    response = case.call(headers={"Authorization": f"Token {key}"})
    TALLY["cases"] += 1
    if response.status_code >= 500:
        TALLY["5xx"] += 1
    try:
        case.validate_response(response, checks=CHECKS)
    except FailureGroup as failures:
        if not SURVEY:
            raise
        for failure in failures.exceptions:
            TALLY[f"failure: {getattr(failure, 'title', type(failure).__name__)}"] += 1
            TALLY[f"where: {case.method} {case.path} -> {response.status_code}"] += 1


FUZZ_SETTINGS = settings(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)


@reader_schema.parametrize()
@FUZZ_SETTINGS
def test_api_as_a_reader(case, tokens, in_test_transaction):
    _call(case, tokens["user"])


@schema.parametrize()
@FUZZ_SETTINGS
def test_api_as_staff(case, tokens, in_test_transaction):
    _call(case, tokens["staff"])


@schema.parametrize()
@FUZZ_SETTINGS
def test_api_as_an_agent(case, tokens, in_test_transaction):
    _call(case, tokens["agent"])
