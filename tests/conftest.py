"""Shared fixtures.

Tiers that need a real service (PostgreSQL, Redis, Slurm, Chromium) skip with a message
naming what to install, except in CI (CI=true), where a missing service fails the run.
"""

from __future__ import annotations

import json
import os
from urllib.parse import urlsplit, urlunsplit

import pytest

from config.celery import app as celery_app

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _redis_url_of_this_worker() -> str:
    """The integration tiers' Redis database; under pytest-xdist each worker takes its own
    (db N, N-1, ... modulo Redis's 16), so two workers' Celery queues and keys never meet."""
    url = os.environ.get("ATLAS_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    parts = urlsplit(url)
    db = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(db - int(worker[2:])) % 16}"))


TEST_REDIS_URL = _redis_url_of_this_worker()
os.environ["ATLAS_TEST_REDIS_URL"] = TEST_REDIS_URL


def require(condition: bool, message: str) -> None:
    """Skip (or, in CI, fail) a test whose real component is missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI requires it: {message}")
    pytest.skip(message)


def pytest_configure(config) -> None:
    """Passwords hash with MD5 in tests: Django's PBKDF2 (1,000,000 rounds, a third of a
    second here) would be paid by every test that creates a person or signs one in."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    _flush_by_delete()


def _flush_by_delete() -> None:
    """A transactional test's teardown empties the tables with DELETE on PostgreSQL, not
    Django's TRUNCATE: TRUNCATE of the 55 tables takes 0.6-2 s (each table's files made anew),
    DELETE of a test's few rows 25 ms, and the integration, browser and Slurm tiers are full of
    such teardowns. The same effect: no sequence is reset either way unless asked (then
    TRUNCATE, as Django does); the foreign keys are deferred, and `flush` runs its statements
    in one transaction."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or not tables:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        return [f"DELETE FROM {self.quote_name(table)};" for table in tables]

    DatabaseOperations.sql_flush = sql_flush


@pytest.fixture(autouse=True)
def _heartbeats_by_statement():
    """Every heartbeat the one statement unless a test turns the memory on (config/wsgi.py
    does for the web process); nothing remembered or pending leaks into the next test."""
    yield
    from inventory.services import heartbeat_memory_disable

    heartbeat_memory_disable()


@pytest.fixture(autouse=True)
def _tasks_in_process():
    """Unit and API tests run Celery tasks in-process; the integration tier uses a real worker."""
    before = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = before


@pytest.fixture
def agent_token(db):
    from inventory.services import agent_token_create

    _token, key = agent_token_create(name="test")
    return key


@pytest.fixture
def user(db, django_user_model):
    return django_user_model.objects.create_user("reader", password="reader-password")


@pytest.fixture
def staff(db, django_user_model):
    return django_user_model.objects.create_user("staff", password="staff-password", is_staff=True)


@pytest.fixture
def api(user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def staff_api(staff):
    """An API client signed in as staff (the one home of this fixture)."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(staff)
    return client


@pytest.fixture
def post_report(client, django_capture_on_commit_callbacks):
    """POST a report dict as an agent would (on-commit tasks run); returns the response."""

    def post(report, key, **extra):
        body = report if isinstance(report, (bytes, str)) else json.dumps(report)
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(
                "/api/v1/reports/",
                data=body,
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Token {key}",
                **extra,
            )

    return post
