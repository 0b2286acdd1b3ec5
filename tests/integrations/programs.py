"""Debian's prometheus and prometheus-alertmanager, started by a test on loopback ports.

Each runs from a temporary directory with its own config and storage, is waited for with a
bounded loop and stopped by its pid (never by name).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import requests
import yaml

from tests.conftest import require
from tests.integration.services import Process, free_port, wait_until

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "rules.yml"


def binary(name: str, package: str) -> str:
    path = shutil.which(name)
    require(
        path is not None,
        f"{name} not found (apt-get install -y --no-install-recommends {package})",
    )
    return path  # type: ignore[return-value]


def _ready(url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


class Prometheus:
    """A Prometheus scraping one target's /metrics every second with a bearer token."""

    def __init__(self, workdir: Path, *, target: str, token: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [
                {
                    "job_name": "cluster-atlas",
                    "metrics_path": "/metrics",
                    "authorization": {"type": "Bearer", "credentials": token},
                    "static_configs": [{"targets": [target]}],
                }
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.process = Process(
            [
                binary("prometheus", "prometheus"),
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            env=dict(os.environ),
            log=workdir / "prometheus.log",
        )
        if not wait_until(lambda: _ready(self.url + "/-/ready"), timeout=30, interval=0.2):
            self.process.stop()
            raise AssertionError("prometheus did not start:\n" + self.process.output()[-3000:])

    def query(self, expr: str) -> dict:
        response = requests.get(self.url + "/api/v1/query", params={"query": expr}, timeout=5)
        return response.json()

    def value(self, expr: str) -> float | None:
        """The single value of an instant query, None while there is none."""
        answer = self.query(expr)
        assert answer["status"] == "success", answer
        result = answer["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        self.process.stop()


class Alertmanager:
    """An Alertmanager with one receiver that sends nowhere; no cluster gossip port."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "route": {"receiver": "null", "group_wait": "1s", "group_interval": "1s"},
            "receivers": [{"name": "null"}],
        }
        (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
        self.process = Process(
            [
                binary("prometheus-alertmanager", "prometheus-alertmanager"),
                f"--config.file={workdir / 'alertmanager.yml'}",
                f"--storage.path={workdir / 'am'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            env=dict(os.environ),
            log=workdir / "alertmanager.log",
        )
        if not wait_until(lambda: _ready(self.url + "/-/ready"), timeout=30, interval=0.2):
            self.process.stop()
            raise AssertionError("alertmanager did not start:\n" + self.process.output()[-3000:])

    def alerts(self, **params) -> list[dict]:
        response = requests.get(self.url + "/api/v2/alerts", params=params, timeout=5)
        response.raise_for_status()
        return response.json()

    def stop(self) -> None:
        self.process.stop()
