"""The health pages: /health/, /gpus/<id>/ and the server page's Events card. Agent text is
escaped, every code has its meaning on hover, and the query count does not grow with the fleet."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from health.catalog import xid_info
from health.services import health_findings_sync, health_sweep
from health.tables import (
    BY_MODEL_TABLE,
    BY_RACK_TABLE,
    GPU_OFFENDERS_TABLE,
    NEEDING_ACTION_TABLE,
    SERVER_OFFENDERS_TABLE,
    SLOT_OFFENDERS_TABLE,
)
from inventory.models import Gpu, Server
from tests.reports import gpu_uuid

from .fleet import Agent, server_report, with_events, xid

pytestmark = pytest.mark.django_db

BUS2 = "0000:38:00.0"
EVIL = "<script>alert(1)</script>"


def _recent() -> str:
    return (timezone.now() - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fleet(n: int, first: int = 0) -> None:
    for i in range(first, first + n):
        host = f"dgx-{i:02}"
        event = xid(79, BUS2, _recent(), uuid=gpu_uuid(host, 2), message=EVIL)
        Agent(host).send(with_events(server_report(host), event, xid(13, BUS2, _recent())))
    health_sweep()
    health_findings_sync()


def test_the_health_page_lists_gpus_needing_action_with_reason_and_meaning(client, user):
    _fleet(1)
    client.force_login(user)
    page = client.get("/health/").content.decode()
    gpu = Gpu.objects.get(uuid=gpu_uuid("dgx-00", 2))
    assert f'href="/gpus/{gpu.pk}/"' in page
    assert "Xid 79" in page and "dgx-00" in page
    assert 'id="figure-health-events"' in page  # the events-by-code figure
    assert EVIL not in page


def test_the_menu_links_health(client, user):
    client.force_login(user)
    assert 'href="/health/"' in client.get("/").content.decode()


def test_the_gpu_page_shows_its_events_with_meaning_on_hover(client, user):
    _fleet(1)
    gpu = Gpu.objects.get(uuid=gpu_uuid("dgx-00", 2))
    client.force_login(user)
    page = client.get(f"/gpus/{gpu.pk}/").content.decode()
    assert f'title="{xid_info(79).meaning}"' in page.replace("&#x27;", "'")
    assert "dgx-00" in page and EVIL not in page and "&lt;script&gt;" in page
    assert client.get("/gpus/999999/").status_code == 404


def test_the_server_page_has_an_events_card(client, user):
    _fleet(1)
    client.force_login(user)
    page = client.get(f"/servers/{Server.objects.get().pk}/").content.decode()
    assert 'id="server-events"' in page and "Xid 13" in page and "Xid 79" in page


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx)


def test_the_pages_cost_the_same_queries_for_8_or_48_gpus(client, user):
    client.force_login(user)
    _fleet(1)
    gpu = Gpu.objects.get(uuid=gpu_uuid("dgx-00", 2))
    small = _queries(client, "/health/"), _queries(client, f"/gpus/{gpu.pk}/")
    _fleet(5, first=1)
    assert (_queries(client, "/health/"), _queries(client, f"/gpus/{gpu.pk}/")) == small


def _csv(client, table: str) -> list[dict[str, str]]:
    response = client.get(f"/health/?format=csv&table={table}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_the_health_pages_tables_and_their_csv_share_one_declaration(client, user):
    _fleet(2)
    client.force_login(user)
    page = client.get("/health/").content.decode()
    for table in (
        NEEDING_ACTION_TABLE,
        GPU_OFFENDERS_TABLE,
        SLOT_OFFENDERS_TABLE,
        SERVER_OFFENDERS_TABLE,
        BY_MODEL_TABLE,
        BY_RACK_TABLE,
    ):
        assert f'id="{table.id}"' in page
        assert f"table={table.id}" in page  # its export link
        rows = _csv(client, table.id)
        assert rows, table.id
        assert list(rows[0]) == table.headers  # the page's columns, in the page's order
    gpu = Gpu.objects.get(uuid=gpu_uuid("dgx-00", 2))
    by_server = {r["Server"]: r for r in _csv(client, NEEDING_ACTION_TABLE.id)}
    row = by_server["dgx-00"]
    assert (row["Severity"], row["GPU"], row["Serial"]) == ("critical", "dgx-00 GPU 2", gpu.serial)
    assert row["Reason"] == "open health finding: Fatal Xid 79"
    assert row["Action"].startswith("Drain the node")
    assert row["Since"].startswith(str(timezone.now().year)) and "T" in row["Since"]  # ISO
    assert f'href="/gpus/{gpu.pk}/">dgx-00 GPU 2</a>' in page
    (rack,) = _csv(client, BY_RACK_TABLE.id)
    assert rack == {"Rack": "", "Episodes": "4", "Events": "4"}  # "no rack" on the page only
    assert "no rack" in page
    slots = _csv(client, SLOT_OFFENDERS_TABLE.id)
    assert {(r["Server"], r["PCI bus"]) for r in slots} == {("dgx-00", BUS2), ("dgx-01", BUS2)}
    assert all(int(r["Episodes"]) >= 1 for r in slots)
    assert EVIL not in page


def test_a_health_csv_reads_only_its_table_and_an_unknown_one_is_a_404(client, user):
    _fleet(1)
    client.force_login(user)
    with CaptureQueriesContext(connection) as ctx:
        _csv(client, BY_RACK_TABLE.id)
    page_queries = _queries(client, "/health/")
    assert len(ctx) < page_queries - 4  # not the other five tables, not the figure
    assert client.get("/health/?format=csv&table=nope").status_code == 404
