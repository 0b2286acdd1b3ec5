"""Web requests' database bounds: a statement past ATLAS_DB_STATEMENT_TIMEOUT_MS, or a
database that is away, answers 503 with Retry-After (JSON on the API, the page elsewhere),
never a 500; the timeout binds web processes only (core/db/bounds.py)."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import connection
from django.db.models import CharField
from django.db.models.expressions import RawSQL
from django.test import Client

from clusters import selectors
from clusters.models import Cluster, Node
from core.db import bounds
from tests.conftest import require

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reader_client(user) -> Client:
    client = Client(raise_request_exception=False)  # as production: handler500, not a raise
    client.force_login(user)
    return client


@pytest.fixture
def a_node(db) -> Node:
    return Node.objects.create(cluster=Cluster.objects.create(name="hpc", kind="slurm"), name="n1")


_node_list = selectors.node_list


def _slow_node_list(*, include_gone: bool = False):
    """A node list whose every row takes 0.3 s: pg_sleep in the select list."""
    return _node_list(include_gone=include_gone).annotate(
        slept=RawSQL("pg_sleep(0.3)::text", (), output_field=CharField())
    )


@pytest.fixture
def web_timeout(settings):
    """This process as a web process (config/wsgi.py) with a 50 ms timeout, on a new connection."""
    require(
        connection.vendor == "postgresql", "needs DATABASE_URL=postgres://... (statement_timeout)"
    )
    settings.ATLAS_DB_STATEMENT_TIMEOUT_MS = 50
    connection.close()
    bounds.enable_for_web()
    yield
    bounds.disable_for_web()
    connection.close()  # the next test's connection starts without the timeout


@pytest.mark.postgres
def test_a_statement_past_the_timeout_answers_the_api_503(web_timeout, reader_client, a_node):
    with mock.patch.object(selectors, "node_list", _slow_node_list):
        response = reader_client.get("/api/v1/nodes/")
    assert response.status_code == 503
    assert response["Retry-After"] == str(bounds.TIMEOUT_RETRY_AFTER_S)
    assert "took too long" in response.json()["detail"]
    # The connection is fine afterwards: the next request is answered.
    assert reader_client.get("/api/v1/nodes/").status_code == 200


@pytest.mark.postgres
def test_a_statement_past_the_timeout_answers_a_page_503(web_timeout, reader_client, a_node):
    with mock.patch.object(selectors, "node_list", _slow_node_list):
        response = reader_client.get("/nodes/")
    assert response.status_code == 503
    assert response["Retry-After"] == str(bounds.TIMEOUT_RETRY_AFTER_S)
    assert response["Content-Type"].startswith("text/html")
    assert b"Try again in a moment" in response.content


@pytest.mark.postgres
def test_the_timeout_binds_web_processes_only(web_timeout, reader_client, a_node):
    """Without config/wsgi.py's mark (a Celery worker, a command), the slow query finishes."""
    bounds.disable_for_web()
    connection.close()
    with mock.patch.object(selectors, "node_list", _slow_node_list):
        assert reader_client.get("/api/v1/nodes/").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


@pytest.mark.postgres
def test_a_zero_timeout_is_off(web_timeout, settings):
    settings.ATLAS_DB_STATEMENT_TIMEOUT_MS = 0
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


@pytest.mark.postgres
@pytest.mark.parametrize("timeout_ms", [50, 0])
def test_web_connections_compile_no_query(web_timeout, settings, timeout_ms):
    """JIT off in web processes (with or without a timeout), the server's default elsewhere:
    compiling a page's count cost seconds (bench/lists.py)."""
    settings.ATLAS_DB_STATEMENT_TIMEOUT_MS = timeout_ms
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"
    bounds.disable_for_web()
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "on"


def _refused(*args, **kwargs):
    raise connection.Database.OperationalError("connection refused")


@pytest.mark.parametrize("path", ["/api/v1/nodes/", "/nodes/"])
def test_a_database_away_at_connect_answers_503(reader_client, a_node, path):
    connection.close()
    with mock.patch.object(connection, "get_new_connection", _refused):
        response = reader_client.get(path)
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    if path.startswith("/api/"):
        assert response.json() == {"detail": "The database is unavailable; try again in a moment."}


@pytest.mark.parametrize("path", ["/api/v1/nodes/", "/nodes/"])
def test_a_database_lost_mid_request_answers_503(reader_client, a_node, path):
    """The session and the user load, then the node list's query meets a terminated backend."""
    from django.db.backends.utils import CursorWrapper

    real = CursorWrapper._execute

    def execute(self, sql, params, *ignored_wrappers):
        if "clusters_node" in sql:
            with (
                self.db.wrap_database_errors
            ):  # as Django raises it: its own, caused by the driver's
                raise connection.Database.OperationalError(
                    "terminating connection due to administrator command"
                )
        return real(self, sql, params, *ignored_wrappers)

    with mock.patch.object(CursorWrapper, "_execute", execute):
        response = reader_client.get(path)
    assert response.status_code == 503
    assert response["Retry-After"] == "5"


def test_other_errors_stay_500(reader_client, a_node):
    with mock.patch.object(selectors, "node_list", side_effect=RuntimeError("a bug")):
        response = reader_client.get("/nodes/")
    assert response.status_code == 500
