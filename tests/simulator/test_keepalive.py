"""The demo's keep-alive: beats while the backend answers, ends by itself when it stops, and
never outlives `make run` (Ctrl-C, a stopped server, refused tokens)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from simulator.keepalive import Beat, Plan, keep_alive, spawn
from simulator.schedulers import Snapshot
from tests.agent.http_backend import ScriptedBackend, free_port

OK, DOWN, REFUSED = Beat(sent=2, snapshots=1), Beat(unreachable=True), Beat(refused=True)


def run_loop(outcomes: list[Beat], **limits) -> tuple[str, int]:
    """The loop over scripted beats, on a clock that moves one second per beat."""
    beats = iter(outcomes)
    calls = 0
    now = 0.0
    stop = threading.Event()

    def beat() -> Beat:
        nonlocal calls, now
        calls += 1
        now += 1.0
        outcome = next(beats, None)
        if outcome is None:
            stop.set()
            return OK
        return outcome

    reason = keep_alive(beat, interval=0, retry_s=0, stop=stop, clock=lambda: now, **limits)
    return reason, calls


def test_the_loop_waits_for_the_server_to_start_then_beats():
    reason, calls = run_loop([DOWN, DOWN, OK, OK], startup_s=10, patience_s=3)
    assert (reason, calls) == ("stopped", 5)


def test_the_loop_ends_when_the_server_stops_answering():
    reason, calls = run_loop([OK, OK] + [DOWN] * 10, startup_s=100, patience_s=3)
    assert reason == "the backend stopped answering" and calls == 6


def test_a_short_silence_such_as_an_autoreload_does_not_end_it():
    reason, _ = run_loop([OK, DOWN, DOWN, OK, DOWN, OK], startup_s=100, patience_s=3)
    assert reason == "stopped"


def test_the_loop_gives_up_on_a_server_that_never_starts():
    reason, calls = run_loop([DOWN] * 20, startup_s=5, patience_s=1)
    assert reason == "the backend never answered" and calls == 6


def test_refused_tokens_end_it_at_once():
    reason, calls = run_loop([OK, REFUSED, OK])
    assert reason.startswith("the backend refused the fleet") and calls == 2


def test_the_plan_travels_as_json_and_never_shows_its_tokens():
    plan = Plan(
        agent_tokens=["caa_secret-1"],
        reports=[{"host": {"hostname": "a"}}],
        api_token="cau_secret-2",
        snapshots=[Snapshot("k8s", "{}", "application/json")],
    )
    assert Plan.from_json(plan.to_json()) == plan
    assert "secret" not in repr(plan)
    with pytest.raises(ValueError, match="one agent token per report"):
        Plan.from_json(Plan(["a", "b"], [{}], "t").to_json())


def keep_alive_process(backend_url: str, **kwargs) -> subprocess.Popen:
    plan = Plan(
        agent_tokens=["caa_demo-1", "caa_demo-2"],
        reports=[{"host": {"hostname": "a"}}, {"host": {"hostname": "b"}}],
        api_token="cau_demo",
        snapshots=[Snapshot("prod-k8s", '{"kind": "List", "items": []}', "application/json")],
    )
    return spawn(backend_url, plan, stderr=subprocess.PIPE, **kwargs)


def wait_for(condition, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def test_the_process_beats_and_stops_with_the_server():
    backend = ScriptedBackend()
    process = keep_alive_process(backend.url, interval=0.2, patience_s=1)
    try:
        assert wait_for(lambda: len(backend.requests) >= 6), "no second beat"
        paths = [r["path"] for r in backend.requests[:3]]
        assert sorted(paths) == sorted(
            ["/api/v1/reports/", "/api/v1/reports/", "/api/v1/clusters/prod-k8s/snapshots/"]
        )
        assert backend.requests[2]["headers"]["Authorization"] == "Token cau_demo"
        backend.close()
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert "stopped answering" in stderr.decode() and "caa_demo" not in stderr.decode()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_the_process_at_once(signum):
    backend = ScriptedBackend()
    process = keep_alive_process(backend.url, interval=60)
    try:
        assert wait_for(lambda: len(backend.requests) >= 3), "no first beat"
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
        backend.close()
    assert process.returncode == 0 and b"Traceback" not in stderr


@pytest.mark.parametrize("plan", [b"not json", b"[]", b'{"reports": []}'])
def test_a_bad_plan_is_one_line_and_status_2(plan):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "simulator",
            "keep-alive",
            "--url",
            f"http://127.0.0.1:{free_port()}",
        ],
        input=plan,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
