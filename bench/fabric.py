"""Benchmark: importing a rail-optimised fabric of 2,500 / 25,000 servers (8 rails, 3 tiers).

The fabric is `fabric.synthetic`'s: 32 servers a leaf, 8 rail leaves per unit, 8 units a pod,
16 spines a pod (leaves 2:1 oversubscribed), 512 cores. Printed per size: the text's size,
the floor (parsing the same text, nothing else), tier and rail inference on the parsed facts
(pure), the first import through `fabric_snapshot_ingest` (parse, bulk writes, bindings,
tiers, rails, in one transaction), the re-import of the same text (idempotent: nothing
written but `last_seen`), and the queries each import made; then the findings pass a worker
runs after the import; the figure's facts read and drawn, then rendered and stored as that
worker does (`fabric.render`), and the `/fabric/` page, which reads it back, beside its floor
(reading the stored figure alone). Goal: the page under 1 s at 25,000 servers.

    .venv/bin/python bench/fabric.py                  # 2,500 and 25,000 on SQLite
    DATABASE_URL=postgres://... .venv/bin/python bench/fabric.py 25000
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from _django import bench_database, each_size_in_a_fresh_process, machine_load, say, setup

SIZES = [int(a) for a in sys.argv[1:] if a.isdigit()] or [2500, 25000]
LAYOUT = {
    "rails": 8,
    "servers_per_leaf": 32,
    "leaf_uplinks": 16,
    "pods_of": 8,
    "spines_per_pod": 16,
    "cores": 512,
}


def infer(discovery) -> tuple[dict, object]:
    from fabric import binding, graph

    switches = {n.guid for n in discovery.switches}
    pairs, ports, hosts = [], [], Counter()
    for link in discovery.links:
        if link.b_guid in switches:
            pairs.append((link.a_guid, link.b_guid))
        elif link.b_guid:
            description = discovery.nodes[link.b_guid].description
            host = binding.host_name_of(description) or None
            ports.append(
                graph.HostPort(link.b_guid, host, binding.nic_label_of(description), link.a_guid)
            )
            hosts[link.a_guid] += 1
    tiers = graph.infer_tiers(switches, pairs, hosts)
    layout = graph.detect_rails(ports, {s for s, t in tiers.items() if t == 1})
    return tiers, layout


def run_one(n: int) -> None:
    setup()
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    from fabric import tasks
    from fabric.findings import fabric_findings_sync
    from fabric.models import Fabric
    from fabric.parsers import parse_fabric
    from fabric.services import fabric_snapshot_ingest
    from fabric.synthetic import synthetic_fabric

    start = time.perf_counter()
    built = synthetic_fabric(servers=n, **LAYOUT)
    generated = time.perf_counter() - start
    text = built.text.encode()
    say(
        f"fabric {n:>6} servers: {len(text) / 1e6:6.1f} MB of ibnetdiscover text; "
        f"generated in {generated:5.1f} s; load average {machine_load()}"
    )

    start = time.perf_counter()
    discovery = parse_fabric(text)
    floor = time.perf_counter() - start
    say(f"  floor: parse the text              {floor:7.2f} s")
    start = time.perf_counter()
    tiers, layout = infer(discovery)
    inferred = time.perf_counter() - start
    counts = Counter(tiers.values())
    assert counts == {1: len(built.leaves), 2: len(built.spines), 3: len(built.cores)}, counts
    assert len(layout.rails) == LAYOUT["rails"] and layout.rail_optimised
    say(f"  tiers + rails (pure, parsed facts)  {inferred:7.2f} s")

    with bench_database() as (vendor, _name):
        # The findings pass runs on a worker after the import commits; timed on its own below.
        tasks.findings_soon = lambda fabric_id: None
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as first_queries:
            result = fabric_snapshot_ingest(fabric_name="bench", raw=text)
        first = time.perf_counter() - start
        say(
            f"  {'import, first (' + vendor + ')':34s}  {first:7.2f} s  {len(first_queries):5d} "
            f"queries: {result.switches} switches, {result.adapters} adapters, "
            f"{result.links_up} cables"
        )
        reset_queries()
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as again_queries:
            again = fabric_snapshot_ingest(fabric_name="bench", raw=text)
        second = time.perf_counter() - start
        assert (again.added, again.gone) == (0, 0)
        say(
            f"  import, same text again             {second:7.2f} s  "
            f"{len(again_queries):5d} queries"
        )
        fabric = Fabric.objects.get(name="bench")
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as findings_queries:
            findings = fabric_findings_sync(fabric=fabric)
        findings_s = time.perf_counter() - start
        say(
            f"  findings pass (a worker's)          {findings_s:7.2f} s  "
            f"{len(findings_queries):5d} queries, {findings.open} open"
        )
        page = page_times(fabric)
    say(f"  floor: the figure's reads alone     {page['reads']:7.2f} s")
    say(f"  figure from those facts (pure)      {page['figure']:7.2f} s  ({page['level']} level)")
    say(
        f"  figure rendered and stored          {page['render']:7.2f} s  (a worker's, once per "
        "revision; a page that finds it stale pays this)"
    )
    say(f"  floor: the stored figure, as JSON   {page['stored']:7.3f} s  (one row read, dumped)")
    say(
        f"  GET /fabric/ (median of 3)          {page['page']:7.3f} s  {page['queries']:5d} "
        f"queries, {page['bytes'] / 1e3:,.0f} kB (goal: under 1 s)"
    )
    say(f"  load average at the end: {machine_load()}")


def page_times(fabric) -> dict:
    """The /fabric/ page at this size, beside its floors: the figure's facts read and drawn,
    rendered and stored as the worker does after each change, then the page, which reads
    it back (beside reading that row alone)."""
    import json
    from statistics import median

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from fabric.figures import fabric_figure
    from fabric.models import FabricFigure
    from fabric.render import fabric_figures_render
    from fabric.selectors import fabric_figure_facts

    start = time.perf_counter()
    facts = fabric_figure_facts(fabric)
    reads = time.perf_counter() - start
    start = time.perf_counter()
    figure = fabric_figure(facts)
    drawn = time.perf_counter() - start
    start = time.perf_counter()
    fabric_figures_render([fabric.pk])
    rendered = time.perf_counter() - start
    start = time.perf_counter()
    json.dumps(FabricFigure.objects.get(fabric=fabric).figure)
    stored = time.perf_counter() - start
    client = Client()
    client.force_login(get_user_model().objects.create_user("bench"))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.get("/fabric/")
        times.append(time.perf_counter() - start)
        assert response.status_code == 200
    return {
        "reads": reads,
        "figure": drawn,
        "render": rendered,
        "stored": stored,
        "level": figure["layout"]["meta"].get("level", "empty"),
        "page": median(times),
        "queries": len(queries),
        "bytes": len(response.content),
    }


if __name__ == "__main__":
    each_size_in_a_fresh_process("fabric.py", SIZES, run_one)
