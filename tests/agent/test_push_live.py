"""The agent's transport against the real backend (pytest-django's live server).

Between them sits a small forwarding proxy that the tests switch on and off, so "the backend
is down" is a refused connection at the agent's URL, and "back up" is the same URL answering.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent.transport import PermanentError, Sender, Spool, Transport
from inventory.models import Report, Server
from inventory.services import agent_token_create
from simulator.profiles import build
from simulator.reports import simulate_report

from .http_backend import free_port
from .test_transport import simulator_cli

pytestmark = pytest.mark.django_db(transaction=True)


class Forwarder:
    """Relays POSTs from 127.0.0.1:port to the live server; counts what passes."""

    def __init__(self, port: int, target: str) -> None:
        self.bodies: list[dict[str, Any]] = []
        forwarder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                forwarder.bodies.append(json.loads(body) if body.strip() else {})
                request = urllib.request.Request(
                    target + self.path,
                    data=body,
                    method="POST",
                    headers={
                        "Authorization": self.headers.get("Authorization", ""),
                        "Content-Type": "application/json",
                    },
                )
                try:
                    with urllib.request.urlopen(request, timeout=60) as answer:
                        status, payload = answer.status, answer.read()
                except urllib.error.HTTPError as exc:
                    status, payload = exc.code, exc.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def no_wait(seconds: float) -> bool:
    return False


def server_reports(machine) -> list[dict[str, Any]]:
    """Three reports of one server over time: healthy, ECC errors, then a GPU lost."""
    first = simulate_report(machine)
    machine.gpus[0].ecc_corrected = 12
    second = simulate_report(machine)
    del machine.gpus[7]
    third = simulate_report(machine)
    return [first, second, third]


def test_backend_down_then_up_replays_in_order_and_loses_nothing(live_server, tmp_path):
    _, key = agent_token_create(name="live-1")
    port = free_port()
    spool = Spool(tmp_path / "spool")
    sender = Sender(Transport(f"http://127.0.0.1:{port}", key), spool, attempts=2, wait=no_wait)
    first, second, third = server_reports(build("h100", seed=21, hostname="dgx-live-01"))

    assert sender.deliver(first).outcome == "spooled"  # nothing listens: the backend is down
    assert sender.deliver(second).outcome == "spooled"
    assert len(spool.pending()) == 2 and Report.objects.count() == 0

    forwarder = Forwarder(port, live_server.url)  # the backend is back, same URL
    try:
        delivery = sender.deliver(third)
    finally:
        forwarder.close()
    assert delivery.outcome == "sent" and delivery.replayed == 2
    assert delivery.answer["status"] == "pending"
    assert spool.pending() == []
    # in order, oldest first, each once
    assert [len(b["gpus"]) for b in forwarder.bodies] == [8, 8, 7]
    assert [b["gpus"][0]["ecc_errors_corrected"] for b in forwarder.bodies] == [0, 12, 12]
    stored = list(Report.objects.order_by("id"))
    assert [len(r.payload["gpus"]) for r in stored] == [8, 8, 7]
    assert Server.objects.count() == 1  # three reports, one server
    server = Server.objects.get()
    assert server.hostname == "dgx-live-01" and {r.server_id for r in stored} == {server.pk}


def test_4xx_is_a_clear_error_and_not_retried(live_server, tmp_path):
    _, key = agent_token_create(name="live-2")
    port = free_port()
    forwarder = Forwarder(port, live_server.url)
    url = f"http://127.0.0.1:{port}"
    try:
        report = simulate_report(build("l40s", seed=4, hostname="l40s-live"))
        broken = {k: v for k, v in report.items() if k != "host"}
        with pytest.raises(PermanentError) as malformed:
            Sender(Transport(url, key), attempts=5, wait=no_wait).deliver(broken)
        assert malformed.value.status == 400 and "host" in str(malformed.value)
        assert len(forwarder.bodies) == 1

        with pytest.raises(PermanentError) as unknown:
            Sender(Transport(url, "caa_unknown-token"), attempts=5, wait=no_wait).deliver(report)
        assert unknown.value.status == 401 and unknown.value.token_rejected
        assert len(forwarder.bodies) == 2

        # a refused token keeps the spool for when an admin fixes it
        spool = Spool(tmp_path / "spool")
        spool.put(json.dumps(report).encode())
        with pytest.raises(PermanentError):
            Sender(Transport(url, "caa_unknown-token"), spool, wait=no_wait).deliver(report)
        assert len(spool.pending()) == 1 and len(forwarder.bodies) == 3
    finally:
        forwarder.close()
    assert Report.objects.count() == 0


def test_push_command_token_binding_and_secrecy(live_server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    _, key = agent_token_create(name="live-3")
    token_file = tmp_path / "token"
    token_file.write_text(key + "\n")
    common = ("--url", live_server.url + "/", "--token-file", str(token_file))

    sent = simulator_cli("push", "--profile", "a100-mig", "--hostname", "dgx-a100-live", *common)
    assert sent.returncode == 0, sent.stderr
    again = simulator_cli("push", "--profile", "a100-mig", "--hostname", "dgx-a100-live", *common)
    assert again.returncode == 0, again.stderr
    assert Server.objects.filter(hostname="dgx-a100-live").count() == 1
    # the token is bound to that server: another server with it is refused, in one line
    other = simulator_cli("push", "--profile", "l40s", "--hostname", "intruder", *common)
    assert other.returncode == 5
    assert other.stderr.count("\n") == 1 and "(403)" in other.stderr
    assert "bound to another server" in other.stderr
    assert not Server.objects.filter(hostname="intruder").exists()
    for done in (sent, again, other):
        assert key not in done.stdout + done.stderr
    assert key not in caplog.text
