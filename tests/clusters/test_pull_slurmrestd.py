"""``fetch_nodes`` against a local HTTP server that answers like slurmrestd.

The real slurmrestd (Debian's 22.05, v0.0.38) is exercised by the integration tier
(tests/integration/test_slurm_real.py); here a stdlib server replays real and
schema-derived responses to cover versions, auto-detection and failures.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from clusters.parsers import parse_document
from clusters.pull.slurmrestd import SlurmRestError, fetch_nodes, nodes_path, safe_url
from tests.fixtures.scheduler import fixture_text, sample_text

TOKEN = "eyJhbGciOiJIUzI1NiJ9.slurm-secret.sig"
V38 = sample_text("slurm-local-2205-slurmrestd-v0.0.38-nodes.json")
V41 = fixture_text("slurmrestd-v0.0.41-nodes.json")
# What Debian's slurmrestd 22.05 answers for a bad token (seen live): 500 and an error.
BAD_TOKEN_2205 = json.dumps(
    {"meta": {}, "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []}
)


@dataclass
class FakeRestd:
    routes: dict[str, tuple[int, str]]
    requests: list[dict[str, Any]] = field(default_factory=list)
    status_for_bad_token: int = 401


def _handler(restd: FakeRestd) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            restd.requests.append(
                {
                    "path": self.path,
                    "user": self.headers.get("X-SLURM-USER-NAME"),
                    "token": self.headers.get("X-SLURM-USER-TOKEN"),
                }
            )
            if self.path not in restd.routes:
                status, body = 404, "Unable find requested URL. Please view /openapi/v3."
            elif self.headers.get("X-SLURM-USER-TOKEN") != TOKEN:
                status = restd.status_for_bad_token
                body = BAD_TOKEN_2205 if status == 500 else "Authentication failure"
            else:
                status, body = restd.routes[self.path]
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def restd() -> Iterator[tuple[FakeRestd, str]]:
    fake = FakeRestd(
        routes={
            "/slurm/v0.0.38/nodes": (200, V38),
        }
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_fetches_v0038_nodes_with_both_headers(restd):
    fake, url = restd
    document = fetch_nodes(url, TOKEN, user="root", version="v0.0.38", timeout=5)

    assert fake.requests == [{"path": "/slurm/v0.0.38/nodes", "user": "root", "token": TOKEN}]
    snapshot = parse_document(document)
    assert len(snapshot.nodes) == 4
    assert {n.name: n.gpu_used for n in snapshot.nodes}["gpu-node1"] == 3


def test_auto_takes_the_newest_version_the_server_serves(restd):
    fake, url = restd
    fake.routes["/slurm/v0.0.41/nodes/"] = (200, V41)

    document = fetch_nodes(url + "/", TOKEN, user="atlas", version="auto", timeout=5)

    assert parse_document(document).api_version == "v0.0.41"
    assert [r["path"] for r in fake.requests] == [
        "/slurm/v0.0.44/nodes/",
        "/slurm/v0.0.43/nodes/",
        "/slurm/v0.0.42/nodes/",
        "/slurm/v0.0.41/nodes/",
    ]


def test_auto_falls_back_to_v0038(restd):
    _fake, url = restd
    document = fetch_nodes(url, TOKEN, version="auto", timeout=5)
    assert parse_document(document).api_version == "v0.0.38"


def test_the_user_header_is_left_out_when_the_jwt_names_the_user(restd):
    fake, url = restd
    fetch_nodes(url, TOKEN, timeout=5)
    assert fake.requests[0]["user"] is None


def test_an_unserved_version_says_how_to_fix_it(restd):
    _fake, url = restd
    with pytest.raises(SlurmRestError, match=r"does not serve v0\.0\.40") as caught:
        fetch_nodes(url, TOKEN, version="v0.0.40", timeout=5)
    assert caught.value.status == 404


@pytest.mark.parametrize("status", [401, 500])
def test_a_bad_token_is_a_clear_error_without_any_token_in_it(restd, status, caplog):
    fake, url = restd
    fake.status_for_bad_token = status
    wrong = "eyJ.wrong-token-value.sig"
    caplog.set_level(logging.DEBUG)

    with pytest.raises(SlurmRestError) as caught:
        fetch_nodes(url, wrong, user="root", timeout=5)

    message = str(caught.value)
    assert caught.value.status == status
    if status == 401:
        assert "refused the credentials" in message
    else:
        assert "HTTP 500" in message and "Unspecified error" in message
    assert wrong not in message and TOKEN not in message
    assert caught.value.__cause__ is None
    assert wrong not in caplog.text


def test_an_error_answer_with_no_nodes_is_an_error(restd):
    fake, url = restd
    fake.routes["/slurm/v0.0.41/nodes/"] = (
        200,
        fixture_text("slurmrestd-v0.0.41-nodes-auth-error.json"),
    )
    with pytest.raises(SlurmRestError, match="Unable to query nodes"):
        fetch_nodes(url, TOKEN, version="v0.0.41", timeout=5)


def test_an_answer_that_is_not_json_is_an_error(restd):
    fake, url = restd
    fake.routes["/slurm/v0.0.38/nodes"] = (200, "<html>proxy error</html>")
    with pytest.raises(SlurmRestError, match="not JSON"):
        fetch_nodes(url, TOKEN, timeout=5)


def test_an_unreachable_server_never_shows_credentials_in_the_url():
    url = "http://atlas:hunter2@127.0.0.1:9"
    with pytest.raises(SlurmRestError, match="cannot reach slurmrestd") as caught:
        fetch_nodes(url, TOKEN, timeout=2)
    assert "hunter2" not in str(caught.value) and TOKEN not in str(caught.value)
    assert "http://127.0.0.1:9" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "version", "why"),
    [
        ("127.0.0.1:6820", "v0.0.38", "must start with http"),
        ("http://127.0.0.1:6820", "0.0.38", "not a slurmrestd API version"),
    ],
)
def test_bad_arguments_are_refused_before_any_request(url, version, why):
    with pytest.raises(SlurmRestError, match=why):
        fetch_nodes(url, TOKEN, version=version)


def test_paths_follow_each_versions_openapi_spelling():
    assert nodes_path("v0.0.38") == "/slurm/v0.0.38/nodes"
    assert nodes_path("v0.0.44") == "/slurm/v0.0.44/nodes/"
    assert safe_url("https://u:p@slurm.example.org:6820/base?x=1") == (
        "https://slurm.example.org:6820/base"
    )
