"""Sending reports: retries, backoff, the spool, 4xx handling, TLS, and secrecy of the token,
against a small local HTTP backend; then the `push` command end to end."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.schema import report_digest
from agent.transport import (
    SET_ASIDE_AFTER,
    Backoff,
    PermanentError,
    Sender,
    Spool,
    TransientError,
    Transport,
    read_token,
    reports_url,
)

from .conftest import REPO
from .http_backend import ScriptedBackend, free_port

TOKEN = "caa_s3cr3t-token-value-that-must-never-be-logged"


@pytest.fixture
def backend():
    server = ScriptedBackend()
    yield server
    server.close()


class Waits:
    """Records backoff waits instead of sleeping; `stop_after` simulates SIGTERM."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.delays: list[float] = []
        self.stop_after = stop_after

    def __call__(self, seconds: float) -> bool:
        self.delays.append(seconds)
        return self.stop_after is not None and len(self.delays) >= self.stop_after


def report(n: int) -> dict:
    return {"schema": "cluster-atlas/report/v1", "n": n}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("https://atlas.example.com", "https://atlas.example.com/api/v1/reports/"),
        ("https://atlas.example.com/", "https://atlas.example.com/api/v1/reports/"),
        ("https://atlas.example.com/api/v1/reports", "https://atlas.example.com/api/v1/reports/"),
        ("https://atlas.example.com/api/v1/reports/", "https://atlas.example.com/api/v1/reports/"),
        ("http://10.0.0.1:8000/atlas/", "http://10.0.0.1:8000/atlas/api/v1/reports/"),
    ],
)
def test_reports_url_accepts_every_usual_form(given, expected):
    assert reports_url(given) == expected


@pytest.mark.parametrize("bad", ["atlas.example.com", "ftp://atlas/", "https://"])
def test_reports_url_refuses_non_http(bad):
    with pytest.raises(ValueError):
        reports_url(bad)


def test_post_sends_json_with_the_token_header(backend):
    answer = Transport(backend.url, TOKEN).post(json.dumps(report(1)).encode())
    assert answer == {"id": 1, "status": "pending"}
    (request,) = backend.requests
    assert request["path"] == "/api/v1/reports/"
    assert request["headers"]["Authorization"] == f"Token {TOKEN}"
    assert request["headers"]["Content-Type"] == "application/json"
    assert json.loads(request["body"]) == report(1)


def test_5xx_is_retried_with_backoff_then_sent(backend):
    backend.answer(503, {"detail": "maintenance"})
    backend.answer(500, b"<html>oops</html>")
    waits = Waits()
    delivery = Sender(Transport(backend.url, TOKEN), attempts=4, wait=waits).deliver(report(1))
    assert delivery.outcome == "sent" and delivery.answer["status"] == "pending"
    assert len(backend.requests) == 3 and len(waits.delays) == 2


def test_400_is_not_retried_and_names_the_fields(backend):
    backend.answer(400, {"errors": {"gpus.0.uuid": ["This field is required."]}})
    waits = Waits()
    with pytest.raises(PermanentError) as caught:
        Sender(Transport(backend.url, TOKEN), attempts=4, wait=waits).deliver(report(1))
    assert "gpus.0.uuid: This field is required." in str(caught.value)
    assert caught.value.status == 400
    assert len(backend.requests) == 1 and waits.delays == []


def test_413_prints_the_backends_message(backend):
    backend.answer(413, {"detail": "Report larger than 2097152 bytes."})
    with pytest.raises(PermanentError, match=r"\(413\): Report larger than 2097152 bytes"):
        Transport(backend.url, TOKEN).post(b"{}")


def test_unreachable_backend_spools_then_replays_oldest_first(tmp_path):
    port = free_port()
    spool = Spool(tmp_path / "spool")
    sender = Sender(Transport(f"http://127.0.0.1:{port}", TOKEN), spool, attempts=2, wait=Waits())
    for n in (1, 2, 3):
        delivery = sender.deliver(report(n))
        assert delivery.outcome == "spooled" and "unreachable" in delivery.error
    assert len(spool.pending()) == 3
    server = ScriptedBackend(port=port)  # the backend comes back
    try:
        delivery = sender.deliver(report(4))
        assert delivery.outcome == "sent" and delivery.replayed == 3
        assert [body["n"] for body in server.bodies()] == [1, 2, 3, 4]
        assert spool.pending() == []
    finally:
        server.close()


def spooled(spool: Spool) -> list[int]:
    return [json.loads(p.read_bytes())["n"] for p in spool.pending()]


def fail_report(n: int, status: int = 500):
    """A backend rule: answer `status` to report `n` (wherever it comes from), take the rest."""

    def rule(body: bytes):
        return (status, {"detail": "boom"}, {}) if json.loads(body).get("n") == n else None

    return rule


def test_a_spooled_report_answered_500_no_longer_blocks_later_ones(backend, tmp_path):
    spool = Spool(tmp_path / "spool")
    for n in (1, 2):
        spool.put(json.dumps(report(n)).encode())
    backend.rule = fail_report(1)
    delivery = Sender(Transport(backend.url, TOKEN), spool, wait=Waits()).deliver(report(3))
    assert delivery.outcome == "sent" and delivery.replayed == 1
    assert [b["n"] for b in backend.bodies()] == [1, 2, 3]
    assert spooled(spool) == [1]
    assert Spool.attempts(spool.pending()[0]) == 1  # counted: the backend took the others


def test_a_report_that_keeps_failing_is_set_aside_and_named_in_the_next_report(
    backend, tmp_path, caplog
):
    caplog.set_level(logging.INFO)
    spool = Spool(tmp_path / "spool")
    spool.put(json.dumps(report(1)).encode())
    backend.rule = fail_report(1)
    sender = Sender(Transport(backend.url, TOKEN), spool, wait=Waits())
    for n in range(2, 2 + SET_ASIDE_AFTER):
        assert sender.deliver(report(n)).outcome == "sent"
    assert spool.pending() == []
    (kept,) = spool.set_aside_reports()
    assert kept.parent == tmp_path / "spool" / "set-aside"
    assert json.loads(kept.read_bytes())["n"] == 1  # kept whole
    assert f"set aside as {kept}" in caplog.text and TOKEN not in caplog.text

    sender.deliver(report(100))
    sender.deliver(report(101))
    first, second = backend.bodies()[-2:]
    (warning,) = first["warnings"]
    assert "1 report(s) set aside" in warning and kept.name in warning
    assert second["warnings"] == [warning]  # stable: an unchanged server still heartbeats
    assert [b["n"] for b in backend.bodies()].count(1) == SET_ASIDE_AFTER  # no longer sent


def test_a_backend_failing_every_report_sets_nothing_aside(backend, tmp_path):
    spool = Spool(tmp_path / "spool")
    for n in (1, 2, 3, 4):
        spool.put(json.dumps(report(n)).encode())
    backend.rule = lambda body: (500, {"detail": "database down"}, {})
    sender = Sender(Transport(backend.url, TOKEN), spool, attempts=2, wait=Waits())
    for n in range(10, 10 + 2 * SET_ASIDE_AFTER):
        assert sender.deliver(report(n)).outcome == "spooled"
    assert spool.set_aside_reports() == []
    assert all(Spool.attempts(p) == 0 for p in spool.pending())  # nobody's own fault
    # replay ends after a few failures in a row: the rest of the spool is not sent each cycle
    first_cycle = [json.loads(r["body"])["n"] for r in backend.requests[:5]]
    assert first_cycle == [1, 2, 3, 10, 10]


def test_a_backend_asking_to_slow_down_stops_the_replay_and_counts_nothing(backend, tmp_path):
    spool = Spool(tmp_path / "spool")
    spool.put(json.dumps(report(1)).encode())
    spool.put(json.dumps(report(2)).encode())
    backend.answer(429, {"detail": "slow down"}, {"Retry-After": "30"})
    delivery = Sender(Transport(backend.url, TOKEN), spool, wait=Waits()).deliver(report(3))
    assert delivery.outcome == "spooled" and len(backend.requests) == 1
    assert spooled(spool) == [1, 2, 3]
    assert all(Spool.attempts(p) == 0 for p in spool.pending())


def test_the_set_aside_folder_is_bounded_and_says_what_it_deletes(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr("agent.transport.SET_ASIDE_MAX", 2)
    spool = Spool(tmp_path / "spool")
    paths = [spool.put(json.dumps(report(n)).encode()) for n in (1, 2, 3)]
    for path in paths:
        spool.set_aside(path)
    assert [json.loads(p.read_bytes())["n"] for p in spool.set_aside_reports()] == [2, 3]
    assert f"deleting the oldest, {paths[0].name}" in caplog.text


def test_spool_is_bounded_and_keeps_the_newest(tmp_path):
    spool = Spool(tmp_path, max_reports=3)
    for n in range(5):
        spool.put(json.dumps(report(n)).encode())
    assert [json.loads(p.read_bytes())["n"] for p in spool.pending()] == [2, 3, 4]


def test_spool_writes_are_atomic_and_private(tmp_path, monkeypatch):
    spool = Spool(tmp_path / "spool")
    path = spool.put(b'{"n": 1}')
    assert path.read_bytes() == b'{"n": 1}'
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "spool").stat().st_mode & 0o777) == "0o700"
    assert [p.name for p in (tmp_path / "spool").iterdir()] == [path.name]  # no temp left
    # a crash mid-write leaves a temporary file: never replayed as a report
    (tmp_path / "spool" / ".123-1-000001.json.tmp").write_bytes(b'{"n": ')
    assert spool.pending() == [path]

    def broken_fsync(fd):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        spool.put(b'{"n": 2}')
    names = sorted(p.name for p in (tmp_path / "spool").iterdir())
    assert names == [".123-1-000001.json.tmp", path.name]  # the failed write left nothing


def test_replay_drops_a_refused_spooled_report_and_goes_on(backend, tmp_path):
    spool = Spool(tmp_path)
    spool.put(json.dumps(report(1)).encode())
    spool.put(json.dumps(report(2)).encode())
    backend.answer(400, {"errors": {"schema": ["Unknown schema."]}})
    delivery = Sender(Transport(backend.url, TOKEN), spool, wait=Waits()).deliver(report(3))
    assert delivery.outcome == "sent" and delivery.replayed == 1
    assert [b["n"] for b in backend.bodies()] == [1, 2, 3] and spool.pending() == []


def test_a_refused_token_stops_the_replay_and_keeps_the_spool(backend, tmp_path):
    spool = Spool(tmp_path)
    spool.put(json.dumps(report(1)).encode())
    backend.answer(401, {"detail": "Invalid token."})
    with pytest.raises(PermanentError) as caught:
        Sender(Transport(backend.url, TOKEN), spool, wait=Waits()).deliver(report(2))
    assert caught.value.token_rejected
    assert len(spool.pending()) == 1 and len(backend.requests) == 1


def test_retry_after_is_respected(backend):
    backend.answer(429, {"detail": "slow down"}, {"Retry-After": "7"})
    waits = Waits()
    Sender(Transport(backend.url, TOKEN), wait=waits, backoff=Backoff(base=0.1)).deliver(report(1))
    assert waits.delays[0] >= 7


def test_backoff_is_exponential_with_full_jitter():
    backoff = Backoff(base=1.0, cap=30.0, rng=random.Random(1))
    for attempt in range(8):
        ceiling = min(30.0, 2.0**attempt)
        delays = [backoff.delay(attempt) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # the whole range is used: jitter, not a constant


def test_stop_request_ends_retries_and_spools(tmp_path):
    spool = Spool(tmp_path)
    sender = Sender(
        Transport(f"http://127.0.0.1:{free_port()}", TOKEN),
        spool,
        attempts=10,
        wait=Waits(stop_after=1),
    )
    assert sender.deliver(report(1)).outcome == "spooled"
    assert len(spool.pending()) == 1


def test_no_spool_raises_the_transient_error():
    sender = Sender(Transport(f"http://127.0.0.1:{free_port()}", TOKEN), attempts=1)
    with pytest.raises(TransientError, match="unreachable"):
        sender.deliver(report(1))


def test_redirects_are_not_followed(backend):
    other = ScriptedBackend()
    try:
        backend.answer(302, {}, {"Location": f"{other.url}/api/v1/reports/"})
        with pytest.raises(PermanentError, match="redirected"):
            Transport(backend.url, TOKEN).post(b"{}")
        assert other.requests == []  # the token went nowhere else
    finally:
        other.close()


def test_the_token_is_never_logged(backend, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    spool = Spool(tmp_path)
    errors = []
    backend.answer(500, {"detail": f"database down while checking {TOKEN}"})
    backend.answer(401, {"detail": f"Invalid token {TOKEN}"})
    sender = Sender(Transport(backend.url, TOKEN), spool, attempts=2, wait=Waits())
    try:
        sender.deliver(report(1))
    except PermanentError as exc:
        errors.append(str(exc))
    unreachable = Sender(Transport(f"http://127.0.0.1:{free_port()}", TOKEN), spool, wait=Waits())
    errors.append(unreachable.deliver(report(2)).error or "")
    assert errors and caplog.text
    assert TOKEN not in caplog.text and not any(TOKEN in e for e in errors)
    assert "***" in errors[0]
    assert TOKEN not in repr(Transport(backend.url, TOKEN))


def test_token_file_errors_name_the_file_not_the_token(tmp_path):
    empty = tmp_path / "token"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match="is empty"):
        read_token(empty)
    empty.write_text(f"\n{TOKEN}\n")
    assert read_token(empty) == TOKEN


# -- TLS --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(folder / "key.pem"),
            "-out",
            str(folder / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    return folder / "cert.pem", folder / "key.pem"


def test_tls_is_verified_by_default(certificate):
    cert, key = certificate
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ScriptedBackend(ssl_context=context)
    url = f"https://127.0.0.1:{server.port}"
    try:
        with pytest.raises(PermanentError, match=r"not trusted.*--ca-bundle"):
            Transport(url, TOKEN).post(b"{}")
        assert Transport(url, TOKEN, ca_bundle=str(cert)).post(b"{}")["status"] == "pending"
        assert Transport(url, TOKEN, insecure=True).post(b"{}")["status"] == "pending"
    finally:
        server.close()


# -- the push command -------------------------------------------------------------------------


def run_module(module: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,
    )


def agent(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return run_module("agent", *args, **kwargs)


def simulator_cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """`python -m simulator`: the agent's own collect and push, with a simulated server."""
    return run_module("simulator", *args, **kwargs)


@pytest.fixture
def token_file(tmp_path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def test_push_once(backend, token_file):
    done = simulator_cli(
        "push", "--profile", "h100", "--url", backend.url, "--token-file", str(token_file)
    )
    assert done.returncode == 0, done.stderr
    (body,) = backend.bodies()
    assert body["agent"]["source"] == "simulator" and len(body["gpus"]) == 8
    assert TOKEN not in done.stdout + done.stderr


def test_push_to_an_unreachable_backend_spools_and_fails_in_one_line(tmp_path, token_file):
    url = f"http://127.0.0.1:{free_port()}"
    spool = tmp_path / "spool"
    done = simulator_cli(
        "push",
        "--profile",
        "l40s",
        "--url",
        url,
        "--token-file",
        str(token_file),
        "--spool",
        str(spool),
        "--retries",
        "0",
    )
    assert done.returncode == 4
    lines = [
        line
        for line in done.stderr.splitlines()
        if not line.startswith("cluster-atlas-agent: WARNING")
    ]
    assert len(lines) == 1 and "unreachable" in lines[0] and "spooled" in lines[0]
    assert len(list(spool.glob("*.json"))) == 1
    assert TOKEN not in done.stderr


def test_push_refused_prints_the_backend_message(backend, token_file):
    backend.answer(400, {"errors": {"host.hostname": ["This field is required."]}})
    done = simulator_cli(
        "push", "--profile", "h100", "--url", backend.url, "--token-file", str(token_file)
    )
    assert done.returncode == 5
    assert done.stderr.strip().splitlines() == [
        "cluster-atlas-agent: backend refused the report (400): host.hostname: This field is "
        "required."
    ]
    assert len(backend.requests) == 1


def test_push_without_nvml_sends_the_host_and_says_so(backend, token_file):
    done = simulator_cli(
        "push", "--profile", "cpu-only", "--url", backend.url, "--token-file", str(token_file)
    )
    assert done.returncode == 3 and "NVML unavailable" in done.stderr
    assert backend.bodies()[0]["gpus"] == []


def test_push_forever_exits_cleanly_on_sigterm(backend, token_file, tmp_path):
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simulator",
            "push",
            "--profile",
            "h100",
            "--interval",
            "60",
            "--url",
            backend.url,
            "--token-file",
            str(token_file),
            "--spool",
            str(tmp_path / "s"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not backend.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.requests, "the first report never arrived"
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "report sent" in stderr and "stopping" in stderr
    assert TOKEN not in stderr


def test_an_unwritable_spool_loses_one_report_not_the_agent(tmp_path, monkeypatch):
    spool = Spool(tmp_path / "spool")

    def disk_full(body):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spool, "put", disk_full)
    sender = Sender(Transport(f"http://127.0.0.1:{free_port()}", TOKEN), spool, wait=Waits())
    delivery = sender.deliver(report(1))
    assert delivery.outcome == "lost" and "No space left" in delivery.error


def test_a_removed_spool_directory_is_recreated(tmp_path):
    spool = Spool(tmp_path / "spool")
    shutil.rmtree(tmp_path / "spool")
    assert spool.put(b"{}").is_file()


# The digest ahead of the report (X-Atlas-Report-Digest, empty body): docs/api.md.

UNCHANGED = {"id": 1, "status": "unchanged", "server": 1}


def digest_of(request: dict) -> str | None:
    return request["headers"].get("X-Atlas-Report-Digest")


def test_a_report_the_backend_took_goes_next_time_as_its_digest_alone(backend):
    sender = Sender(Transport(backend.url, TOKEN), wait=Waits())
    assert sender.deliver(report(1)).answer["status"] == "pending"
    backend.answer(200, UNCHANGED)
    assert sender.deliver(report(1)).answer == UNCHANGED
    first, second = backend.requests
    assert digest_of(first) is None and json.loads(first["body"]) == report(1)
    assert second["body"] == b"" and digest_of(second) == f"sha256:{report_digest(report(1))}"
    assert second["headers"]["Authorization"] == f"Token {TOKEN}"
    sender.deliver(report(2))  # changed facts go in full at once
    assert digest_of(backend.requests[2]) is None
    assert json.loads(backend.requests[2]["body"]) == report(2)


def test_a_409_brings_the_report_in_full_within_the_same_delivery(backend):
    sender = Sender(Transport(backend.url, TOKEN), wait=Waits())
    sender.deliver(report(1))
    backend.answer(409, {"detail": "the report changed: send it in full", "status": "send-report"})
    delivery = sender.deliver(report(1))
    assert delivery.outcome == "sent" and delivery.answer["status"] == "pending"
    assert [r["body"] == b"" for r in backend.requests] == [False, True, False]


def test_a_backend_that_refuses_digests_gets_full_reports_from_then_on(backend):
    sender = Sender(Transport(backend.url, TOKEN), wait=Waits())
    sender.deliver(report(1))
    backend.answer(400, {"detail": "malformed report", "errors": {"body": ["the JSON is broken"]}})
    assert sender.deliver(report(1)).outcome == "sent"
    assert sender.deliver(report(1)).outcome == "sent"
    assert [digest_of(r) is not None for r in backend.requests] == [False, True, False, False]


def test_a_report_with_events_never_goes_as_a_digest(backend):
    sender = Sender(Transport(backend.url, TOKEN), wait=Waits())
    with_events = {**report(1), "events": [{"kind": "xid", "code": 79}]}
    sender.deliver(with_events)
    sender.deliver(with_events)
    assert all(digest_of(r) is None and r["body"] for r in backend.requests)


def test_a_refused_token_on_a_digest_is_a_permanent_error(backend):
    sender = Sender(Transport(backend.url, TOKEN), wait=Waits())
    sender.deliver(report(1))
    backend.answer(401, {"detail": "Unknown or revoked agent token."})
    with pytest.raises(PermanentError) as caught:
        sender.deliver(report(1))
    assert caught.value.token_rejected and len(backend.requests) == 2


def test_a_failing_digest_is_retried_then_the_report_is_spooled_in_full(backend, tmp_path):
    spool = Spool(tmp_path / "spool")
    waits = Waits()
    sender = Sender(Transport(backend.url, TOKEN), spool, attempts=3, wait=waits)
    sender.deliver(report(1))
    for _ in range(3):
        backend.answer(503, {"detail": "maintenance"})
    delivery = sender.deliver(report(1))
    assert delivery.outcome == "spooled" and len(waits.delays) == 2
    assert all(digest_of(r) for r in backend.requests[1:])
    assert spooled(spool) == [1]  # the spool keeps the report itself, replayed as before
    backend.answer(200, UNCHANGED)  # the next delivery replays it first, in full
    assert sender.deliver(report(1)).replayed == 1
    assert json.loads(backend.requests[4]["body"]) == report(1)
