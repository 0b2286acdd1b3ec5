"""The agent's push loop (run by `python -m simulator push` with a simulated server) delivers
kernel-log events once: with the first delivered (or spooled) report, never again, and not
lost when a delivery fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.agent.conftest import REPO
from tests.agent.http_backend import ScriptedBackend

LOG = REPO / "tests" / "fixtures" / "health" / "dmesg-ctime.log"


def push_loop(backend: ScriptedBackend, tmp_path, *extra: str, reports: int = 3) -> None:
    token = tmp_path / "token"
    token.write_text("caa_test-token\n")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simulator",
            "push",
            "--url",
            backend.url,
            "--token-file",
            str(token),
            "--profile",
            "h100",
            "--kernel-log",
            str(LOG),
            "--interval",
            "0.2",
            "--retries",
            "0",
            *extra,
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(backend.requests) < reports and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert len(backend.requests) >= reports, stderr


def test_the_events_go_with_the_first_delivered_report_only(tmp_path):
    backend = ScriptedBackend()
    try:
        push_loop(backend, tmp_path)
    finally:
        backend.close()
    assert backend.events_sent()[:3] == [5, 0, 0]
    assert json.loads(backend.requests[0]["body"])["events"][0]["code"] == 79


def test_events_of_a_failed_delivery_go_with_the_next_report(tmp_path):
    backend = ScriptedBackend()
    backend.answer(503, {"detail": "down"})  # the first report fails, nothing is spooled
    try:
        push_loop(backend, tmp_path)
    finally:
        backend.close()
    assert backend.events_sent()[:3] == [5, 5, 0]  # sent again with the next cycle, then never


def test_events_of_a_spooled_report_are_not_sent_again_with_later_ones(tmp_path):
    backend = ScriptedBackend()
    backend.answer(503, {"detail": "down"})
    try:
        push_loop(backend, tmp_path, "--spool", str(tmp_path / "spool"), reports=4)
    finally:
        backend.close()
    full = [json.loads(r["body"]) for r in backend.requests if r["body"]]
    with_events = [b for b in full if b["events"]]
    # the failed report went to the spool with its events and was replayed from there
    assert len(with_events) == 2 and with_events[0] == with_events[1]
    assert not any(backend.events_sent()[2:])
