"""`manage.py runschedule` (core/schedule.py): beat's own schedule, run in-process with no
broker. The end to end run, webhook delivered, is in tests/integration/test_embedded_schedule.py."""

from __future__ import annotations

import threading

import pytest
from celery import Celery
from django.conf import settings
from django.core.management import CommandError, call_command

from config.celery import app as celery_app
from core import schedule as schedule_module
from core.schedule import InProcessScheduler, run_schedule


@pytest.fixture(autouse=True)
def no_database(monkeypatch):
    """These tests run schedules of their own tasks, none of which touch the database; the
    connection hygiene between tasks (tested end to end in tests/integration) would open the
    test database, which pytest-django forbids outside a db test."""
    monkeypatch.setattr(schedule_module, "close_old_connections", lambda: None)


def test_it_runs_the_entries_of_the_settings_beat_schedule_and_no_other_list():
    celery_app.loader.import_default_modules()
    scheduler = InProcessScheduler(celery_app)
    schedule = {name: entry.task for name, entry in scheduler.schedule.items()}
    assert schedule == {name: e["task"] for name, e in settings.CELERY_BEAT_SCHEDULE.items()}
    assert all(task in celery_app.tasks for task in schedule.values())


def test_a_failing_task_leaves_the_others_their_turns():
    app = Celery("schedule-test", set_as_current=False)
    app.conf.task_always_eager = True
    app.conf.broker_url = "memory://localhost/"
    runs: list[str] = []
    stop = threading.Event()

    @app.task(name="t.fails")
    def fails():
        runs.append("fails")
        raise RuntimeError("this task always fails")

    @app.task(name="t.works")
    def works():
        runs.append("works")
        if runs.count("works") >= 3:
            stop.set()

    app.conf.beat_schedule = {
        "fails": {"task": "t.fails", "schedule": 0.05},
        "works": {"task": "t.works", "schedule": 0.05},
    }
    timer = threading.Timer(20, stop.set)  # bounded whatever happens
    timer.start()
    try:
        assert run_schedule(app, stop=stop) == "stopped"
    finally:
        timer.cancel()
    assert runs.count("works") == 3 and runs.count("fails") >= 2


def test_it_stops_once_the_server_it_runs_beside_stops_answering():
    app = Celery("schedule-test", set_as_current=False)
    app.conf.broker_url = "memory://localhost/"
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # a second per probe
        return now[0]

    answers = iter([True, True, False, False, False, False])
    why = run_schedule(
        app,
        stop=threading.Event(),
        server_url="http://127.0.0.1:8000",
        patience_s=2,
        probe_every_s=0,
        listening=lambda url: next(answers),
        clock=clock,
    )
    assert why == "the server stopped"


def test_the_command_refuses_to_run_beside_a_broker():
    celery_app.conf.task_always_eager = False  # a broker configured (put back by conftest)
    with pytest.raises(CommandError, match="celery -A config beat"):
        call_command("runschedule")
