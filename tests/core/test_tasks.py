"""core.tasks: one retry policy for every task that retries, and one enqueue that logs and
never raises while the broker is away (what it sent is picked up by a periodic pass)."""

from __future__ import annotations

import logging

import pytest
from django.db import OperationalError, transaction

from config.celery import app as celery_app
from core.tasks import RETRIED, enqueue, enqueue_on_commit, retry_policy


def test_every_task_that_retries_retries_by_the_one_policy():
    celery_app.loader.import_default_modules()
    policy = retry_policy()
    retrying = {
        name: task
        for name, task in celery_app.tasks.items()
        if getattr(task, "autoretry_for", ()) and not name.startswith("celery.")
    }
    assert "inventory.tasks.apply_report" in retrying and "clusters.tasks.reconcile" in retrying
    for name, task in retrying.items():
        assert set(RETRIED) <= set(task.autoretry_for), name
        assert (task.retry_backoff, task.retry_backoff_max, task.max_retries) == (
            policy["retry_backoff"],
            policy["retry_backoff_max"],
            policy["max_retries"],
        ), name
    assert OperationalError in RETRIED


def broker_away(*args, **kwargs):
    raise ConnectionRefusedError("redis://:secret@redis:6379 is away")


def test_enqueue_logs_and_never_raises_when_the_broker_is_away(monkeypatch, caplog):
    from clusters.tasks import reconcile

    monkeypatch.setattr(reconcile, "apply_async", broker_away)
    with caplog.at_level(logging.WARNING, logger="core.tasks"):
        assert enqueue(reconcile) is False
    assert "could not enqueue clusters.tasks.reconcile (ConnectionRefusedError)" in caplog.text
    assert "secret" not in caplog.text


@pytest.mark.django_db
def test_enqueue_on_commit_sends_after_the_commit_and_not_on_rollback(
    monkeypatch, django_capture_on_commit_callbacks
):
    from clusters.tasks import reconcile

    sent = []
    monkeypatch.setattr(reconcile, "apply_async", lambda *a, **k: sent.append((a, k)))
    with django_capture_on_commit_callbacks(execute=True):
        enqueue_on_commit(reconcile, force=True)
        assert sent == []
    assert sent == [(((), {"force": True}), {"retry": False})]
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        try:
            with transaction.atomic():
                enqueue_on_commit(reconcile)
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
    assert callbacks == [] and sent == []


@pytest.mark.django_db
def test_a_reconcile_request_with_the_broker_away_is_logged_and_left_to_beat(monkeypatch, caplog):
    from clusters import tasks
    from clusters.models import ReconcileState

    monkeypatch.setattr(tasks.reconcile, "apply_async", broker_away)
    with caplog.at_level(logging.WARNING, logger="core.tasks"):
        assert tasks.reconcile_soon() is False
    assert ReconcileState.objects.get().requested_at is None  # beat's tick may send it again
    assert "could not enqueue clusters.tasks.reconcile" in caplog.text
