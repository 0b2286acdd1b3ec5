"""The agent enrolls against the real backend (pytest-django's live server): once, keeping
its agent token 0600 in its state directory, then reusing it; no secret in its output."""

from __future__ import annotations

import logging
import os
import stat

import pytest

from agent.enroll import enroll_url, enrollment_identity
from inventory.models import AgentToken, Enrollment, Report, Server
from inventory.services import enrollment_token_create

from .test_transport import simulator_cli

pytestmark = pytest.mark.django_db(transaction=True)


def test_enroll_url_accepts_what_url_accepts():
    for url in ("https://a.example", "https://a.example/", "https://a.example/api/v1/reports/"):
        assert enroll_url(url) == "https://a.example/api/v1/agents/enroll/"
    assert enroll_url("http://h/atlas") == "http://h/atlas/api/v1/agents/enroll/"


def test_identity_carries_node_names_only_when_known():
    host = {"hostname": "n1", "system_uuid": "u", "machine_id": None, "slurm_node_name": "gpu1"}
    assert enrollment_identity({"host": host}) == {
        "hostname": "n1",
        "system_uuid": "u",
        "machine_id": "",
        "slurm_node_name": "gpu1",
    }


def test_push_enrolls_once_keeps_the_token_0600_then_reuses_it(live_server, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    token, key = enrollment_token_create(name="fleet", uses=5)
    secret = tmp_path / "enroll-token"
    secret.write_text(key + "\n")
    state = tmp_path / "state"
    common = (
        "push", "--profile", "h100", "--hostname", "dgx-enrolled", "--url", live_server.url,
        "--enroll-token-file", str(secret), "--state-dir", str(state),
    )  # fmt: skip
    first = simulator_cli(*common)
    assert first.returncode == 0, first.stderr
    stored = state / "agent-token"
    assert stat.S_IMODE(os.stat(stored).st_mode) == 0o600
    agent_key = stored.read_text().strip()
    assert agent_key.startswith("caa_") and list(state.iterdir()) == [stored]

    again = simulator_cli(*common)
    assert again.returncode == 0, again.stderr
    assert stored.read_text().strip() == agent_key
    token.refresh_from_db()
    assert token.uses == 1 and Enrollment.objects.count() == 1
    server = Server.objects.get()
    assert server.hostname == "dgx-enrolled"
    assert AgentToken.objects.get().server == server
    # the second push is a heartbeat (same facts): answered by the same bound token
    assert Report.objects.filter(server=server, token__server=server).exists()
    for done in (first, again):
        assert key not in done.stdout + done.stderr
        assert agent_key not in done.stdout + done.stderr
    assert key not in caplog.text and agent_key not in caplog.text


def test_a_refused_enrollment_is_fatal_in_one_line(live_server, tmp_path, monkeypatch):
    token, key = enrollment_token_create(uses=1)
    from inventory.services import enrollment_token_revoke

    enrollment_token_revoke(token=token)
    state = tmp_path / "state"
    done = simulator_cli(
        "push", "--profile", "h100", "--url", live_server.url, "--state-dir", str(state),
        env={**os.environ, "ATLAS_ENROLLMENT_TOKEN": key},
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "enrollment refused (403)" in done.stderr
    assert "revoked" in done.stderr and key not in done.stderr + done.stdout
    assert not (state / "agent-token").exists() and Server.objects.count() == 0


def test_push_without_any_token_says_what_to_give(tmp_path):
    done = simulator_cli("push", "--profile", "h100", "--url", "http://127.0.0.1:9")
    assert done.returncode == 2 and "--token-file" in done.stderr
