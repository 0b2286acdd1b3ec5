"""The Prometheus side: rules promtool accepts, a Grafana dashboard over existing families,
and a real Prometheus scraping a live server with the bearer token."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.integration.services import wait_until
from tests.integrations.fleet import bulk_fleet
from tests.integrations.metrics_text import families
from tests.integrations.programs import REPO, RULES, Prometheus, binary

DASHBOARD = REPO / "deploy" / "grafana" / "cluster-atlas.json"
RULE_TESTS = REPO / "deploy" / "prometheus" / "rules.test.yml"
SUFFIXES = re.compile(r"_(bucket|sum|count|total)$")


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            exprs.append(variable["definition"].replace("label_values(", "").split(",")[0])
    return exprs


def scraped_families(client, token: str) -> set[str]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    return set(families(response.content.decode()))


def test_promtool_accepts_the_rules():
    promtool = binary("promtool", "prometheus")
    checked = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def test_the_rules_fire_on_lost_gpus_and_critical_findings():
    promtool = binary("promtool", "prometheus")
    tested = subprocess.run(
        [promtool, "test", "rules", str(RULE_TESTS)], capture_output=True, text=True, timeout=60
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.django_db
def test_every_metric_the_rules_and_dashboard_name_exists(client, metrics_on):
    bulk_fleet(3)
    known = scraped_families(client, metrics_on) | {"up"}
    exprs = dashboard_exprs()
    assert len(exprs) > 15
    rules_text = RULES.read_text()
    named = set(re.findall(r"\batlas_[a-z_]+", " ".join(exprs) + rules_text))
    missing = {name for name in named if name not in known and SUFFIXES.sub("", name) not in known}
    # Queue figures exist only with a Redis broker (tests run tasks in-process).
    assert missing <= {"atlas_celery_queue_length", "atlas_broker_up"}, missing


def test_every_dashboard_panel_has_a_query_and_a_place():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "cluster-atlas"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]), panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]


@pytest.mark.django_db(transaction=True)
def test_real_prometheus_scrapes_gpus_and_critical_findings(live_server, metrics_on, tmp_path, api):
    binary("prometheus", "prometheus")
    bulk_fleet(9)
    gpus = api.get("/api/v1/gpus/", {"page_size": 1000}).json()["results"]
    not_lost = sum(1 for g in gpus if g["status"] != "lost")
    critical = api.get(
        "/api/v1/findings/", {"open": "true", "severity": "critical", "page_size": 1000}
    ).json()["count"]
    assert not_lost and critical

    target = live_server.url.removeprefix("http://")
    prometheus = Prometheus(tmp_path, target=target, token=metrics_on)
    try:
        scraped = wait_until(
            lambda: (
                prometheus.value('up{job="cluster-atlas"}') == 1
                and prometheus.value("sum(atlas_gpus)") is not None
            ),
            timeout=30,
            interval=0.5,
        )
        assert scraped, prometheus.query('up{job="cluster-atlas"}')
        assert prometheus.value('sum(atlas_gpus{health!="lost"})') == not_lost
        assert prometheus.value('sum(atlas_findings_open{severity="critical"})') == critical
        for expr in dashboard_exprs():  # every dashboard query is valid PromQL
            answer = prometheus.query(expr.replace("$cluster", ".*"))
            assert answer["status"] == "success", (expr, answer)
        rules = prometheus.query("ALERTS")  # the rule file loaded and evaluates
        assert rules["status"] == "success"
    finally:
        prometheus.stop()


@pytest.mark.django_db(transaction=True)
def test_real_prometheus_with_a_wrong_token_sees_the_target_down(live_server, settings, tmp_path):
    binary("prometheus", "prometheus")
    settings.ATLAS_METRICS_TOKEN = "the-right-token-0123456789"
    prometheus = Prometheus(
        tmp_path, target=live_server.url.removeprefix("http://"), token="a-wrong-token"
    )
    try:
        assert wait_until(
            lambda: prometheus.value('up{job="cluster-atlas"}') == 0, timeout=30, interval=0.5
        )
    finally:
        prometheus.stop()
