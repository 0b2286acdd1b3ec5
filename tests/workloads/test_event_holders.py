"""Health events named by the workload that held their GPU when they began (issue 24, 5),
and the follow-up that names them after `record_health`, in process and with a broker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from config.celery import app as celery_app
from health.choices import EventKind, Severity
from health.models import HealthEvent, holder_words
from health.tasks import record_health
from inventory.models import Gpu
from tests.workloads.factories_joins import hold, server_with_gpus, workload
from workloads import tasks as workload_tasks
from workloads.holders import HeldSpan, HolderIndex
from workloads.services.holders import event_holders_name

pytestmark = pytest.mark.django_db

T0 = timezone.now().replace(microsecond=0) - timedelta(hours=3)


def event(server, index: int, at, *, code: int = 79, **fields) -> HealthEvent:
    gpu = Gpu.objects.filter(server=server, index=index).first()
    return HealthEvent.objects.create(
        server=server,
        gpu=gpu,
        gpu_serial=gpu.serial if gpu else fields.pop("gpu_serial", ""),
        kind=EventKind.XID,
        code=code,
        severity=Severity.CRITICAL,
        first_seen=at,
        last_seen=at,
        dedupe_key=f"{server.pk}:{index}:{code}:{at.isoformat()}",
        **fields,
    )


def holder_of(ev: HealthEvent) -> Any:
    return HealthEvent.objects.get(pk=ev.pk).holder


def test_an_event_names_the_job_whose_allocation_covers_its_time():
    dgx = server_with_gpus("dgx-07")
    job = workload("5679", user="alice", started_at=T0)
    hold(job, dgx, [3], since=T0, until=T0 + timedelta(hours=1))
    before = event(dgx, 3, T0 - timedelta(minutes=1), code=31)
    during = event(dgx, 3, T0 + timedelta(minutes=2))
    at_end = event(dgx, 3, T0 + timedelta(hours=1), code=48)  # `until` is not held
    other_gpu = event(dgx, 2, T0 + timedelta(minutes=2), code=94)

    assert event_holders_name() == 1

    assert holder_of(during) == {
        "workload_id": job.pk,
        "scheduler_id": "5679",
        "user": "alice",
        "account": "",
        "kind": "slurm_job",
        "cluster": "hpc",
        "words": "job 5679 of alice",
    }
    assert [holder_of(e) for e in (before, at_end, other_gpu)] == [None, None, None]
    assert HealthEvent.objects.get(pk=during.pk).holder_words == "job 5679 of alice"


def test_a_job_still_holding_the_gpu_names_a_later_event():
    dgx = server_with_gpus("dgx-01")
    job = workload("77", user="bob", started_at=T0)
    hold(job, dgx, range(8), since=T0)
    ev = event(dgx, 5, T0 + timedelta(hours=2))
    assert event_holders_name() == 1
    assert holder_of(ev)["scheduler_id"] == "77"


def test_a_gpu_that_moved_servers_is_matched_by_its_serial():
    old = server_with_gpus("dgx-02")
    job = workload("900", user="carol", started_at=T0)
    hold(job, old, [0], since=T0, until=T0 + timedelta(hours=2))
    serial = "dgx-02-S0"
    # The GPU moves: its old row goes (the allocation keeps the serial) and a new row on
    # another server carries the serial; an event recorded there (while the job's listing
    # still held it) is matched by serial.
    Gpu.objects.filter(server=old, index=0).delete()
    new = server_with_gpus("dgx-03", gpus=0)
    Gpu.objects.create(server=new, index=4, uuid="GPU-new", serial=serial)
    ev = event(new, 4, T0 + timedelta(minutes=30))
    assert event_holders_name() == 1
    assert holder_of(ev)["user"] == "carol"


def test_pods_are_named_by_their_namespace():
    node = server_with_gpus("gpu-node-1")
    pods = workload("ml/trainer", kind="pods", cluster="prod", user="", account="ml")
    hold(pods, node, [0, 1], since=T0)
    ev = event(node, 1, T0 + timedelta(minutes=5))
    event_holders_name()
    assert HealthEvent.objects.get(pk=ev.pk).holder_words == "pods ml/trainer"


def test_naming_is_one_query_per_batch_however_many_events(django_assert_num_queries):
    servers = [server_with_gpus(f"dgx-{i:02}") for i in range(4)]
    for n, server in enumerate(servers):
        hold(workload(str(100 + n), started_at=T0), server, range(8), since=T0)
        for index in range(8):
            event(server, index, T0 + timedelta(minutes=index + 1))
    # the events, their allocations, the bulk update; then the empty next batch
    with django_assert_num_queries(4):
        assert event_holders_name() == 32
    with django_assert_num_queries(1):
        assert event_holders_name() == 0  # named events are not looked at again


def test_events_older_than_the_lookback_are_left_alone():
    dgx = server_with_gpus("dgx-09")
    hold(workload("1"), dgx, [0], since=T0 - timedelta(days=10))
    ev = event(dgx, 0, T0 - timedelta(days=5))
    assert event_holders_name() == 0
    assert event_holders_name(since=T0 - timedelta(days=6)) == 1
    assert holder_of(ev)["scheduler_id"] == "1"


def test_the_rule_prefers_the_gpu_row_and_the_latest_start_when_shared():
    a = {"scheduler_id": "a"}
    b = {"scheduler_id": "b"}
    c = {"scheduler_id": "c"}
    index = HolderIndex(
        [
            HeldSpan(1, "S1", T0, None, a),
            HeldSpan(1, "S1", T0 + timedelta(minutes=10), None, b),  # shared (MPS)
            HeldSpan(None, "S1", T0, None, c),
        ]
    )
    assert index.holder_at(1, "S1", T0 + timedelta(minutes=20)) is b
    assert index.holder_at(1, "S1", T0 + timedelta(minutes=5)) is a
    assert index.holder_at(2, "S1", T0 + timedelta(minutes=5)) is a  # by serial
    assert index.holder_at(None, "", T0) is None
    assert holder_words(None) == ""
    assert holder_words({"scheduler_id": "5", "words": "job 5"}) == "job 5"


def test_the_follow_up_names_events_after_record_health_in_both_modes(monkeypatch):
    sent: list[str] = []
    monkeypatch.setattr(
        workload_tasks.name_event_holders, "apply_async", lambda *a, **k: sent.append("named")
    )
    monkeypatch.setattr("health.tasks.health_sweep", lambda: 3)
    monkeypatch.setattr("health.tasks.health_findings_sync", lambda: (0, 0, 0))
    for eager in (True, False):
        celery_app.conf.task_always_eager = eager  # restored by the autouse fixture
        record_health.apply().get()
    monkeypatch.setattr("health.tasks.health_sweep", lambda: 0)
    record_health.apply().get()  # nothing recorded: nothing follows
    assert sent == ["named", "named"]


def test_in_process_the_follow_up_names_the_event_at_once(monkeypatch):
    dgx = server_with_gpus("dgx-07")
    hold(workload("5679"), dgx, [3], since=T0)
    ev = event(dgx, 3, T0 + timedelta(minutes=2))
    monkeypatch.setattr("health.tasks.health_sweep", lambda: 1)
    monkeypatch.setattr("health.tasks.health_findings_sync", lambda: (0, 0, 0))
    record_health.apply().get()
    assert holder_of(ev)["scheduler_id"] == "5679"


def test_the_pages_say_who_held_the_gpu_linked_and_escaped(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("ops"))
    dgx = server_with_gpus("dgx-07")
    job = workload("5679", user="alice")
    hold(job, dgx, [3], since=T0)
    ev = event(dgx, 3, T0 + timedelta(minutes=2))
    evil = workload("<i>6</i>", user="<script>bob</script>")
    hold(evil, dgx, [4], since=T0)
    event(dgx, 4, T0 + timedelta(minutes=3), code=48)
    event_holders_name()
    link = f'<a href="/workloads/{job.pk}/">job 5679 of alice</a>'
    health = client.get("/health/").content.decode()
    gpu = client.get(f"/gpus/{ev.gpu_id}/").content.decode()
    server = client.get(f"/servers/{dgx.pk}/").content.decode()
    assert all(link in page for page in (health, gpu, server))
    for page in (health, server):  # the GPU page lists GPU 3's events only
        assert "<script>bob" not in page and "&lt;script&gt;bob&lt;/script&gt;" in page
    local = timezone.localtime(ev.first_seen)
    assert f"Xid 79 on dgx-07 GPU 3 at {local:%Y-%m-%d %H:%M} while job 5679 of alice held it" in (
        health
    )
    response = client.get("/health/?format=csv&table=recent-events")
    csv = b"".join(response.streaming_content).decode()
    assert "job 5679 of alice" in csv


def test_the_health_events_api_names_the_workload(api):
    dgx = server_with_gpus("dgx-07")
    job = workload("5679", user="alice")
    hold(job, dgx, [3], since=T0)
    event(dgx, 3, T0 + timedelta(minutes=2))
    event(dgx, 1, T0 + timedelta(minutes=2), code=48)
    event_holders_name()
    rows = api.get("/api/v1/health-events/").json()["results"]
    by_code = {r["code"]: r["workload"] for r in rows}
    assert by_code[48] is None
    assert by_code[79] == {
        "workload_id": job.pk,
        "scheduler_id": "5679",
        "kind": "slurm_job",
        "cluster": "hpc",
        "user": "alice",
        "account": "",
    }
