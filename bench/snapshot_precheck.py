"""Benchmark: what a large node snapshot costs before its 202 (the worker's own parse and
validation, `snapshot_precheck`) beside what the worker then does (`snapshot_apply`: the same
parse, then the writes), on a fresh database, for kubectl JSON and scontrol text.

Printed per size: the body's size, the floor (`json.loads` of the JSON / splitting the text
into lines: the least any check of the whole body costs), the precheck, and the worker's
apply of the stored body to an empty cluster. The precheck is the part of the 202 that grew;
the rest of the worker's time is the writes the 202 is kept for.

    .venv/bin/python bench/snapshot_precheck.py              # 5,000 and 20,000 nodes, SQLite
    DATABASE_URL=postgres://... .venv/bin/python bench/snapshot_precheck.py 20000
"""

from __future__ import annotations

import json
import sys
import time

from _django import bench_database, machine_load, say, setup

SIZES = [int(a) for a in sys.argv[1:] if a.isdigit()] or [5000, 20000]


def bodies(count: int) -> dict[str, bytes]:
    from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text

    return {
        "kubectl JSON": k8s_node_list(*(k8s_node(f"dgx-{i:06d}") for i in range(count))).encode(),
        "scontrol text": scontrol_text(
            *(scontrol_node(f"gpu-{i:06d}") for i in range(count))
        ).encode(),
    }


def floor(name: str, raw: bytes) -> None:
    if name == "kubectl JSON":
        json.loads(raw)
    else:
        raw.decode().splitlines()


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    setup()
    from clusters.models import ClusterSnapshot
    from clusters.services import snapshot_apply, snapshot_precheck, snapshot_receive

    with bench_database() as (vendor, _):
        say(f"snapshot precheck on {vendor}, load {machine_load()}")
        for count in SIZES:
            for name, raw in bodies(count).items():
                cluster = f"b-{count}-{name.split()[0].lower()}"
                floor_s = seconds(lambda name=name, raw=raw: floor(name, raw))
                check_s = seconds(
                    lambda cluster=cluster, raw=raw: snapshot_precheck(
                        cluster_name=cluster, raw=raw
                    )
                )
                result = snapshot_receive(cluster_name=cluster, raw=raw)  # precheck, store
                apply_s = seconds(lambda result=result: snapshot_apply(snapshot_id=result.id))
                status = ClusterSnapshot.objects.get(pk=result.id).status
                say(
                    f"{count:>6} nodes, {name:<13} {len(raw) / 2**20:6.1f} MiB: floor "
                    f"{floor_s:5.2f} s, precheck {check_s:5.2f} s "
                    f"({check_s / floor_s:.1f}x floor), worker apply {apply_s:5.2f} s "
                    f"({status}; precheck is {check_s / apply_s:.0%} of it)"
                )


if __name__ == "__main__":
    main()
