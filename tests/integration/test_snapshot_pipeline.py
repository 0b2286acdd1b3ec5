"""Snapshots through Redis and a real Celery worker: large ones applied by the worker, and a
burst of posts queueing one reconcile, not one each."""

from __future__ import annotations

import json

import pytest

from clusters.models import ClusterSnapshot, Node, ReconcileState
from tests.nodes import k8s_node, k8s_node_list

from .services import start_worker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def queued_tasks(redis_url: str) -> list[str]:
    """The task names waiting in the default queue, oldest last (kombu's Redis layout)."""
    import redis

    return [
        json.loads(message)["headers"]["task"]
        for message in redis.Redis.from_url(redis_url).lrange("celery", 0, -1)
    ]


def post(client, name: str, body: str):
    return client.generic("POST", f"/api/v1/clusters/{name}/snapshots/", body, "application/json")


def test_a_large_snapshot_is_answered_at_once_and_applied_by_the_worker(
    staff_api, redis_url, use_broker, tmp_path, settings
):
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 1024
    body = k8s_node_list(*(k8s_node(f"n{i:03d}") for i in range(200)))
    worker = start_worker(redis_url, tmp_path)
    try:
        use_broker(redis_url)
        response = post(staff_api, "big", body)
        assert response.status_code == 202, response.content
        answer = response.json()
        assert answer["status"] == "pending" and answer["nodes"] is None

        def applied() -> bool:
            return ClusterSnapshot.objects.get(pk=answer["id"]).status == "applied"

        assert wait_until(applied, 60, 0.2), worker.output()[-3000:]
        assert wait_until(lambda: ReconcileState.objects.filter(nodes_revision__gt=0), 30, 0.2)
    finally:
        worker.stop()
    status = staff_api.get(answer["url"]).json()
    assert (status["status"], status["nodes"], status["added"]) == ("applied", 200, 200)
    assert Node.objects.filter(cluster__name="big", gone_at__isnull=True).count() == 200
    assert "apply_snapshot[" in worker.output()


def test_a_burst_of_snapshots_queues_one_reconcile(staff_api, redis_url, use_broker, tmp_path):
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    use_broker(redis_url)  # no worker yet: what the burst queues stays in Redis to be counted
    for i in range(60):
        response = post(staff_api, f"c{i % 3}", k8s_node_list(k8s_node(f"n{i}"), k8s_node("m")))
        assert response.status_code in (201, 202), response.content
    assert queued_tasks(redis_url).count("clusters.tasks.reconcile") == 1

    worker = start_worker(redis_url, tmp_path)
    try:
        assert wait_until(lambda: not queued_tasks(redis_url), 60, 0.2), worker.output()[-3000:]
        assert wait_until(
            lambda: ReconcileState.objects.filter(requested_at__isnull=True).exists(), 30, 0.2
        )
        # the next change after the reconcile started queues the next one
        post(staff_api, "c0", k8s_node_list(k8s_node("n0"), k8s_node("m")))
        assert wait_until(lambda: worker.output().count("clusters.tasks.reconcile[") >= 2, 30)
    finally:
        worker.stop()
