"""Benchmark: the Ethernet fabric read from LLDP for 2,500 / 25,000 servers (8 RoCE NICs each,
a rail leaf per 32 servers per rail), as beat's `rebind-fabrics` pass reads it.

The servers and NICs are written straight to the database (as applied reports leave them:
each NIC with the neighbour lldpd heard). Printed per size: the floor (the pure reading of
the same NIC facts, `fabric.lldp.lldp_fabric`), the first pass (switches, adapters, cables
and every NIC's switch and port written), a pass after one report (nothing changed but the
revision), and the queries each made.

    .venv/bin/python bench/fabric_lldp.py                  # 2,500 and 25,000 on SQLite
    DATABASE_URL=postgres://... .venv/bin/python bench/fabric_lldp.py 25000
"""

from __future__ import annotations

import sys
import time

from _django import bench_database, each_size_in_a_fresh_process, machine_load, say, setup

SIZES = [int(a) for a in sys.argv[1:] if a.isdigit()] or [2500, 25000]
RAILS = 8
SERVERS_PER_LEAF = 32


def _fleet(n: int) -> None:
    """n servers, each with RAILS RoCE NICs, NIC k on its unit's rail-k leaf."""
    from inventory.models import Nic, Server

    servers = Server.objects.bulk_create(
        [Server(identity=f"hostname:roce{i:05d}", hostname=f"roce{i:05d}") for i in range(n)],
        batch_size=5000,
    )
    nics = []
    for i, server in enumerate(servers):
        unit = i // SERVERS_PER_LEAF
        for k in range(RAILS):
            leaf = unit * RAILS + k
            nics.append(
                Nic(
                    server=server,
                    name=f"mlx5_{k}",
                    netdev=f"ens{k + 1}f0np0",
                    kind="ethernet",
                    mac=f"b8:3f:d2:{i >> 8 & 0xFF:02x}:{i & 0xFF:02x}:{k:02x}",
                    speed_mbps=400000,
                    state="up",
                    lldp_neighbors=[
                        {
                            "system_name": f"roce-leaf-{leaf:05d}",
                            "chassis_id": f"1c:34:da:{leaf >> 16 & 0xFF:02x}:"
                            f"{leaf >> 8 & 0xFF:02x}:{leaf & 0xFF:02x}",
                            "port_id": f"swp{i % SERVERS_PER_LEAF + 1}",
                            "port_description": f"roce{i:05d} mlx5_{k}",
                            "management_address": "10.50.0.1",
                        }
                    ],
                )
            )
    Nic.objects.bulk_create(nics, batch_size=5000)


def run_one(n: int) -> None:
    setup()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from fabric import lldp, tasks
    from fabric.services import _lldp_facts, ethernet_fabric_sync
    from inventory.services import revision_bump

    with bench_database() as (vendor, _name):
        tasks.findings_soon = lambda fabric_id: None  # a worker's, after the commit
        say(f"lldp {n:>6} servers x {RAILS} NICs ({vendor}); load average {machine_load()}")
        _fleet(n)
        revision_bump(name="inventory")
        start = time.perf_counter()
        facts, _current = _lldp_facts()
        heard = lldp.lldp_fabric(facts)
        floor = time.perf_counter() - start
        assert len(heard.links) == n * RAILS
        say(f"  floor: read the NICs, pure reading  {floor:7.2f} s")
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as first_queries:
            first = ethernet_fabric_sync()
        first_s = time.perf_counter() - start
        assert first.nics_filled == n * RAILS, first
        say(
            f"  first pass                          {first_s:7.2f} s  {len(first_queries):5d} "
            f"queries: {first.switches} switches, {first.nics} NICs, {first.links} cables"
        )
        revision_bump(name="inventory")
        start = time.perf_counter()
        with CaptureQueriesContext(connection) as again_queries:
            again = ethernet_fabric_sync()
        again_s = time.perf_counter() - start
        assert (again.added, again.gone, again.nics_filled) == (0, 0, 0), again
        say(
            f"  pass, nothing heard anew            {again_s:7.2f} s  "
            f"{len(again_queries):5d} queries"
        )
        say(f"  load average at the end: {machine_load()}")


if __name__ == "__main__":
    each_size_in_a_fresh_process("fabric_lldp.py", SIZES, run_one)
