"""A node-set apply that changes many rows refreshes the table's planner statistics after
commit (PostgreSQL), so a fresh bulk load is never planned as an empty table."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.utils import timezone

from clusters.models import Cluster, Node
from clusters.parsers.records import NodeRecord
from clusters.services import node_set_replace
from core.db.statistics import needs_analyze
from tests.conftest import require


def _reltuples() -> float:
    """pg_class's row estimate: -1 until the table is first analyzed (or vacuumed)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'clusters_node'::regclass")
        return cursor.fetchone()[0]


def test_what_counts_as_a_bulk_change():
    assert needs_analyze(changed=1001, total=1_000_000)
    assert needs_analyze(changed=101, total=1000)  # a tenth of a smaller table
    assert needs_analyze(changed=100, total=0)  # a first load
    assert not needs_analyze(changed=5, total=0)  # a handful of nodes is no bulk load
    assert not needs_analyze(changed=11, total=100)
    assert not needs_analyze(changed=1000, total=100_000)
    assert not needs_analyze(changed=0, total=0)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_bulk_node_set_is_analyzed_after_commit():
    require(connection.vendor == "postgresql", "needs DATABASE_URL=postgres://... (ANALYZE)")
    cluster = Cluster.objects.create(name="big", kind="slurm")
    records = [NodeRecord(name=f"gpu-{i:05d}", kind="slurm") for i in range(1200)]
    assert _reltuples() != 1200
    with transaction.atomic():
        node_set_replace(cluster=cluster, records=records, now=timezone.now())
        assert _reltuples() != 1200  # not inside the transaction: after commit
    assert Node.objects.count() == 1200
    assert _reltuples() == 1200
    with connection.cursor() as cursor:  # vacuumed too: counts read the index alone
        cursor.execute("SELECT relallvisible FROM pg_class WHERE relname = 'clusters_node'")
        assert cursor.fetchone()[0] > 0


@pytest.mark.django_db
def test_a_fabric_import_asks_for_the_statistics_of_each_table_it_changed(monkeypatch):
    """The first import of a fabric changes every row of its switches, adapters and links;
    the same import again changes none (only `last_seen`, rewritten set-wise)."""
    from fabric import services
    from fabric.models import Adapter, FabricLink, Switch
    from tests.fabric.conftest import fixture_text

    asked: list[tuple[type, int, int]] = []
    monkeypatch.setattr(
        services,
        "analyze_after_commit",
        lambda model, *, changed, total: asked.append((model, changed, total)),
    )
    raw = fixture_text("ibnetdiscover-router-dualport.out")
    services.fabric_snapshot_ingest(fabric_name="f", raw=raw)
    first = {model: (changed, total) for model, changed, total in asked}
    assert set(first) == {Switch, Adapter, FabricLink}
    assert first[Switch][0] == Switch.objects.count() and first[Switch][1] == 0
    assert first[FabricLink][0] == FabricLink.objects.count() > 0
    asked.clear()
    services.fabric_snapshot_ingest(fabric_name="f", raw=raw)
    assert {model: changed for model, changed, _ in asked} == {Switch: 0, Adapter: 0, FabricLink: 0}
