"""GET /metrics: token handling, a parsable exposition that agrees with the API, and a scrape
whose query count does not grow with the fleet."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from integrations.selectors import HEALTHY
from integrations.views import bearer_token_matches
from inventory.health import gpu_health
from tests.conftest import TEST_REDIS_URL
from tests.integrations.fleet import bulk_fleet
from tests.integrations.metrics_text import families, samples

pytestmark = pytest.mark.django_db


def scrape(client, token: str) -> str:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content[:200]
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return response.content.decode()


def api_items(api, path: str, **params) -> list[dict]:
    response = api.get(path, {"page_size": 1000, **params})
    assert response.status_code == 200
    assert response.json()["next"] is None
    return response.json()["results"]


def test_metrics_are_off_while_no_token_is_set(client, settings):
    settings.ATLAS_METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


@pytest.mark.parametrize(
    "header", [None, "Bearer wrong-token", "Token scrape-me-0123456789abcdef", "Bearer", "Basic x"]
)
def test_a_missing_or_wrong_token_gets_401(client, metrics_on, header):
    extra = {"HTTP_AUTHORIZATION": header} if header is not None else {}
    response = client.get("/metrics", **extra)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert metrics_on not in response.content.decode()


def test_the_bearer_compare_is_exact():
    assert bearer_token_matches("Bearer abc", "abc")
    assert bearer_token_matches("bearer abc", "abc")
    assert not bearer_token_matches("Bearer abcd", "abc")
    assert not bearer_token_matches("Bearer ab", "abc")
    assert not bearer_token_matches("abc", "abc")


def test_only_get(client, metrics_on):
    response = client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {metrics_on}")
    assert response.status_code == 405


def test_exposition_parses_with_every_family(client, metrics_on):
    bulk_fleet(12)
    found = families(scrape(client, metrics_on))
    for name, kind in {
        "atlas_servers": "gauge",
        "atlas_gpus": "gauge",
        "atlas_mig_devices": "gauge",
        "atlas_nodes": "gauge",
        "atlas_findings_open": "gauge",
        "atlas_server_report_age_seconds": "histogram",
        "atlas_report_apply_latency_seconds": "histogram",
        "atlas_reports_received": "counter",
        "atlas_reports": "gauge",
        "atlas_reports_pending": "gauge",
        "atlas_reports_pending_oldest_age_seconds": "gauge",
        "atlas_cluster_last_success_timestamp_seconds": "gauge",
        "atlas_webhook_deliveries": "gauge",
    }.items():
        assert found[name].type == kind, name


def test_every_gauge_equals_what_the_api_says(client, api, metrics_on):
    bulk_fleet(40)
    text = scrape(client, metrics_on)

    servers = api_items(api, "/api/v1/servers/")
    assert samples(text, "atlas_servers", "state") == {
        (state,): float(n) for state, n in Counter(s["state"] for s in servers).items()
    }

    gpus = api_items(api, "/api/v1/gpus/")
    by_health = Counter((g["name"], gpu_health(g).problem or HEALTHY) for g in gpus)
    assert samples(text, "atlas_gpus", "model", "health") == {
        key: float(n) for key, n in by_health.items()
    }
    assert ("NVIDIA H100 80GB HBM3", "lost") in by_health  # the fleet has each kind

    migs = api_items(api, "/api/v1/mig-devices/")
    assert samples(text, "atlas_mig_devices", "profile") == {
        (p,): float(n) for p, n in Counter(m["profile"] for m in migs).items()
    }

    nodes = api_items(api, "/api/v1/nodes/")
    node_counts = Counter(
        (n["cluster"], n["kind"], "true" if n["server"] else "false") for n in nodes
    )
    assert samples(text, "atlas_nodes", "cluster", "kind", "bound") == {
        k: float(v) for k, v in node_counts.items()
    }

    findings = api_items(api, "/api/v1/findings/", open="true")
    assert samples(text, "atlas_findings_open", "type", "severity") == {
        k: float(v) for k, v in Counter((f["type"], f["severity"]) for f in findings).items()
    }
    assert ("unhealthy_gpu", "critical") in {(f["type"], f["severity"]) for f in findings}

    reported = [s for s in servers if s["last_seen"]]
    assert samples(text, "atlas_server_report_age_seconds", suffix="_count") == {
        (): float(len(reported))
    }
    buckets = samples(text, "atlas_server_report_age_seconds", "le", suffix="_bucket")
    online = sum(1 for s in servers if s["state"] == "online")
    assert buckets[("300",)] == online  # the stale threshold is a bucket bound


def test_report_figures(client, metrics_on):
    servers = bulk_fleet(12)
    text = scrape(client, metrics_on)
    pending = sum(1 for i in range(len(servers)) if i % 6 == 0)
    assert samples(text, "atlas_reports_pending") == {(): float(pending)}
    assert samples(text, "atlas_reports", "status") == {
        ("pending",): float(pending),
        ("applied",): float(len(servers) - pending),
    }
    latency = samples(text, "atlas_report_apply_latency_seconds", "le", suffix="_bucket")
    assert latency[("0.5",)] == 0 and latency[("1",)] == len(servers) - pending
    assert samples(text, "atlas_report_apply_latency_seconds", suffix="_sum")[()] == pytest.approx(
        len(servers) - pending
    )
    oldest = samples(text, "atlas_reports_pending_oldest_age_seconds")[()]
    assert 5 <= oldest < 60


def test_reports_received_counts_each_answer(client, metrics_on, post_report, agent_token):
    from tests.reports import make_report

    assert post_report(make_report("dgx-01", gpus=1), agent_token).status_code == 202
    assert post_report(b"{not json", agent_token).status_code == 400
    assert post_report(make_report("dgx-01", gpus=1), "wrong-key").status_code in (401, 403)
    text = scrape(client, metrics_on)
    received = samples(text, "atlas_reports_received", "outcome", "code", suffix="_total")
    assert received[("rejected", "400")] == 1
    assert sum(v for (outcome, _code), v in received.items() if outcome == "rejected") == 2
    accepted = {k: v for k, v in received.items() if k[0] != "rejected"}
    assert sum(accepted.values()) == 1
    assert next(iter(accepted))[1] == "202"


def test_reports_are_not_counted_while_metrics_are_off(settings, post_report, agent_token):
    from integrations.models import ReportOutcomeCount
    from integrations.services.outcomes import outcome_buffer
    from tests.reports import make_report

    settings.ATLAS_METRICS_TOKEN = ""
    settings.ATLAS_METRICS_FLUSH_S = 0
    post_report(make_report("dgx-01", gpus=1), agent_token)
    outcome_buffer.flush()
    assert not ReportOutcomeCount.objects.exists()


def test_answers_are_written_in_sums_not_one_commit_each():
    from collections import Counter as Counts

    from integrations.services.outcomes import OutcomeBuffer

    now = [0.0]
    written: list[Counts] = []
    buffer = OutcomeBuffer(flush_every_s=lambda: 10, clock=lambda: now[0], write=written.append)
    for _ in range(3):
        buffer.add(status_code=202, status="unchanged")
    buffer.add(status_code=413)
    assert written == []
    now[0] = 10.0
    buffer.add(status_code=202, status="pending")
    assert written == [Counts({("unchanged", 202): 3, ("rejected", 413): 1, ("pending", 202): 1})]
    buffer.add(status_code=202, status="something new")
    buffer.flush()
    assert written[-1] == Counts({("accepted", 202): 1})


def test_a_failed_write_keeps_the_counts_for_the_next():
    from collections import Counter as Counts

    from django.db import OperationalError

    from integrations.services.outcomes import OutcomeBuffer

    attempts: list[Counts] = []

    def write(counts):
        attempts.append(Counts(counts))
        if len(attempts) == 1:
            raise OperationalError("database away")

    buffer = OutcomeBuffer(flush_every_s=lambda: 0, clock=lambda: 0.0, write=write)
    buffer.add(status_code=202, status="unchanged")  # the write fails, nothing is lost
    buffer.add(status_code=202, status="unchanged")
    assert attempts[-1] == Counts({("unchanged", 202): 2})


def test_last_successful_sync_per_cluster(client, metrics_on):
    from clusters.services import snapshot_ingest
    from tests.nodes import k8s_node, k8s_node_list

    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("gpu-a01")))
    syncs = samples(
        scrape(client, metrics_on), "atlas_cluster_last_success_timestamp_seconds", "cluster"
    )
    from clusters.models import Cluster

    assert syncs == {("prod",): Cluster.objects.get(name="prod").last_success_at.timestamp()}


def test_the_scrape_costs_the_same_queries_for_5_and_500_servers(client, metrics_on):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            scrape(client, metrics_on)
        return len(ctx.captured_queries)

    bulk_fleet(5, prefix="few")
    few = queries()
    bulk_fleet(495, prefix="many")
    assert queries() == few
    assert few <= 15


def test_queue_length_is_read_from_the_redis_broker(client, metrics_on):

    import redis

    from config.celery import app as celery_app
    from tests.conftest import require
    from tests.integration.services import redis_ping

    url = TEST_REDIS_URL
    require(redis_ping(url), f"no Redis at {url} (apt-get install redis-server)")
    conf = celery_app.conf
    saved = (conf.broker_url, conf.task_always_eager)
    connection_ = redis.Redis.from_url(url)
    queue = conf.task_default_queue or "celery"
    connection_.delete(queue)
    connection_.rpush(queue, "a", "b", "c")
    try:
        conf.broker_url, conf.task_always_eager = url, False
        text = scrape(client, metrics_on)
    finally:
        conf.broker_url, conf.task_always_eager = saved
        connection_.delete(queue)
        connection_.close()
    assert samples(text, "atlas_celery_queue_length") == {(): 3.0}
    assert samples(text, "atlas_broker_up") == {(): 1.0}


def test_a_broker_that_is_away_is_a_figure_not_an_error(client, metrics_on):
    from config.celery import app as celery_app
    from tests.integration.services import free_port

    conf = celery_app.conf
    saved = (conf.broker_url, conf.task_always_eager)
    try:
        conf.broker_url = f"redis://127.0.0.1:{free_port()}/0"
        conf.task_always_eager = False
        text = scrape(client, metrics_on)
    finally:
        conf.broker_url, conf.task_always_eager = saved
    assert samples(text, "atlas_broker_up") == {(): 0.0}
    assert "atlas_celery_queue_length" not in families(text)


def test_in_process_tasks_have_no_queue(client, metrics_on):
    text = scrape(client, metrics_on)
    assert "atlas_celery_queue_length" not in families(text)
    assert "atlas_broker_up" not in families(text)
