"""Bodies over their endpoint's limit are refused 413 before a byte is read (issue 26 item 6),
and the server is asked to close the connection after one."""

from __future__ import annotations

import io

import pytest

from clusters.models import ClusterSnapshot
from core.api.body_limit import REFUSED, close_after_refusal

pytestmark = pytest.mark.django_db

HUGE = str(300 * 1024 * 1024)  # 300 MB, claimed and never sent


class Unreadable(io.RawIOBase):
    """A request stream that fails the test if anything reads it."""

    read_calls = 0

    def read(self, size: int = -1) -> bytes:
        Unreadable.read_calls += 1
        raise AssertionError("the body was read")

    def readline(self, size: int | None = -1) -> bytes:
        return self.read()


@pytest.fixture
def unread():
    Unreadable.read_calls = 0
    yield {"wsgi.input": Unreadable(), "CONTENT_LENGTH": HUGE}
    assert Unreadable.read_calls == 0


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


@pytest.mark.parametrize(
    ("method", "path", "detail", "limit"),
    [
        (
            "post",
            "/api/v1/clusters/c1/snapshots/",
            "snapshot too large",
            "ATLAS_SNAPSHOT_MAX_BYTES",
        ),
        ("post", "/api/v1/fabrics/f1/snapshots/", "body too large", "ATLAS_SNAPSHOT_MAX_BYTES"),
        ("put", "/api/v1/fabrics/f1/node-name-map/", "body too large", "ATLAS_SNAPSHOT_MAX_BYTES"),
        ("post", "/api/v1/agents/enroll/", "body too large", "ATLAS_API_BODY_MAX_BYTES"),
    ],
)
def test_a_300_mb_body_is_refused_before_reading(
    staff_client, unread, settings, method, path, detail, limit
):
    response = getattr(staff_client, method)(path, content_type="text/plain", **unread)
    assert response.status_code == 413
    body = response.json()
    assert body["detail"] == detail
    assert body["errors"]["body"] == [f"the limit is {getattr(settings, limit)} bytes"]
    assert response.wsgi_request.environ[REFUSED] is True
    assert not ClusterSnapshot.objects.exists()


def test_a_300_mb_report_is_refused_before_reading(client, agent_token, unread):
    response = client.post(
        "/api/v1/reports/",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {agent_token}",
        **unread,
    )
    assert response.status_code == 413
    assert response.json()["detail"] == "report too large"


def test_a_body_within_the_limit_is_read(staff_client, settings):
    settings.ATLAS_SNAPSHOT_MAX_BYTES = 10
    response = staff_client.post(
        "/api/v1/clusters/c1/snapshots/", "0123456789", content_type="text/plain"
    )
    assert response.status_code == 400  # read and parsed: not a snapshot, but not a 413
    assert REFUSED not in response.wsgi_request.environ


def test_a_limit_is_the_setting_of_now(staff_client, settings):
    settings.ATLAS_SNAPSHOT_MAX_BYTES = 9
    response = staff_client.post(
        "/api/v1/clusters/c1/snapshots/", "0123456789", content_type="text/plain"
    )
    assert response.status_code == 413
    assert response.json()["errors"]["body"] == ["the limit is 9 bytes"]


def chunked(data: bytes) -> dict:
    return {
        "wsgi.input": io.BytesIO(data),
        "CONTENT_LENGTH": "",
        "HTTP_TRANSFER_ENCODING": "chunked",
    }


def test_a_chunked_body_over_the_limit_is_read_only_to_the_limit(staff_client, settings):
    settings.ATLAS_SNAPSHOT_MAX_BYTES = 1000
    extra = chunked(b"x" * 5000)
    response = staff_client.post(
        "/api/v1/clusters/c1/snapshots/", content_type="text/plain", **extra
    )
    assert response.status_code == 413
    assert extra["wsgi.input"].tell() == 1001  # the limit and one byte: no further


def test_a_chunked_body_within_the_limit_is_the_body(staff_client, settings):
    from tests.nodes import scontrol_node, scontrol_text

    raw = scontrol_text(scontrol_node("gpu-node1")).encode()
    response = staff_client.post(
        "/api/v1/clusters/c1/snapshots/", content_type="text/plain", **chunked(raw)
    )
    assert response.status_code == 201, response.json()
    assert response.json()["nodes"] == 1


class FakeGunicornResponse:
    """What gunicorn passes as `start_response`'s owner: `force_close` sends Connection: close."""

    def __init__(self) -> None:
        self.closed = False
        self.started: list = []

    def force_close(self) -> None:
        self.closed = True

    def start_response(self, status, headers, exc_info=None):
        self.started.append(status)


@pytest.mark.parametrize("refused", [True, False])
def test_the_server_closes_the_connection_after_a_refusal_only(refused):
    def app(environ, start_response):
        environ[REFUSED] = refused
        start_response("413 Request Entity Too Large" if refused else "200 OK", [])
        return [b""]

    server = FakeGunicornResponse()
    close_after_refusal(app)({}, server.start_response)
    assert server.closed is refused
    assert len(server.started) == 1
