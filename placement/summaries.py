"""Per-server placement summaries (`placement.ServerPlacement`): the write side.

A summary holds what placement and failure domains read of one server (its GPUs with their
state, its GPU pair link classes, its MIG devices, its usable count), built from the same row
reads as `selectors.fleet_load` uses for a server without one, so both paths give the same facts.
It is stamped with the server's `last_report_hash`: applying a changed report makes it stale
(the reads take the rows until it is rebuilt); a heartbeat leaves it fresh. Its shape (what
makes servers alike to placement) is published on the server (`Server.placement_shape`), in
the rebuild's transaction and only while the server's facts are still those it was built
from; applying a changed report empties it. Node bindings and health findings are read live
beside it, so they never make it stale.

`placement_summaries_refresh` rebuilds the stale ones (Celery beat, `placement.tasks`) or the
servers named; `manage.py placement_summaries` is the backfill.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import Any

from django.db import transaction
from django.db.models import F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from inventory.models import Server

from .models import ServerPlacement
from .selectors import gpu_rows, link_rows, mig_rows

BATCH = 2000


def stale_servers() -> QuerySet:
    """Servers with a report hash and no summary built from it, or its shape not published
    (a `server_id` values query)."""
    fresh = (
        ServerPlacement.objects.filter(stamp=F("server__last_report_hash"))
        .exclude(shape="")
        .values("server_id")
    )
    return (
        Server.objects.exclude(last_report_hash="")
        .filter(~Q(pk__in=fresh) | Q(placement_shape=""))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def summary_of(
    gpus: list[tuple], classes: set[str], pairs: dict[tuple[int, int], str], migs: list[tuple]
) -> dict[str, Any]:
    """The stored fields of one server's summary from its rows (pure).

    `gpus`: (id, index, name, memory, numa, state) as `selectors.gpu_rows` gives them (state:
    problem code x 2, plus 1 in MIG mode); `migs`: (uuid, gpu_id, profile, memory).
    """
    ordered = sorted(gpus, key=lambda g: (g[1], g[0]))
    return {
        "gpus": json.dumps([list(g) for g in ordered], separators=(",", ":")),
        "links": _links_text(classes, pairs),
        "migs": json.dumps(sorted(list(m) for m in migs), separators=(",", ":")),
        "shape": shape_of(ordered, classes, pairs, migs),
        "usable": sum(1 for g in gpus if g[5] == 0),
        "known": sum(1 for g in gpus if g[5] >> 1 != 1),  # problem code 1: lost
    }


def shape_of(
    gpus: list[tuple], classes: set[str], pairs: dict[tuple[int, int], str], migs: list[tuple]
) -> str:
    """A digest of the summary without row ids or UUIDs: GPUs, pair classes and MIG devices
    by GPU index.

    Two servers of one shape are alike to placement, so the reads plan once for all the
    nodes on servers of one shape (`selectors.group_nodes`): a fleet of one model is a handful of
    shapes, not 25,000 servers.
    """
    index = {g[0]: g[1] for g in gpus}
    described = [list(g[1:]) for g in sorted(gpus, key=lambda g: (g[1], g[0]))]
    by_index = sorted([index.get(a, -1), index.get(b, -1), c] for (a, b), c in pairs.items())
    devices = sorted([index.get(m[1], -1), m[2], m[3]] for m in migs)
    text = json.dumps([described, sorted(classes), by_index, devices], separators=(",", ":"))
    known = any(g[5] >> 1 != 1 for g in gpus)  # problem code 1: lost
    return ("g" if known else "n") + hashlib.blake2b(text.encode(), digest_size=15).hexdigest()


def _links_text(classes: set[str], pairs: dict[tuple[int, int], str]) -> str:
    """One class (a DGX: NV18 throughout) as itself, "" for none; JSON only for a server that
    mixes classes, so most summaries decode without a JSON parse."""
    if not pairs and len(classes) <= 1:
        return next(iter(classes), "")
    return json.dumps(
        {"classes": sorted(classes), "pairs": sorted([a, b, c] for (a, b), c in pairs.items())},
        separators=(",", ":"),
    )


def placement_summaries_refresh(
    *, server_ids: list[int] | None = None, limit: int | None = None
) -> int:
    """Rebuild the summaries of `server_ids`, else of the stale servers (at most `limit`);
    the number rebuilt. Five queries and three writes per batch of 2,000 servers."""
    wanted = list(server_ids) if server_ids is not None else list(stale_servers()[:limit])
    done = 0
    for start in range(0, len(wanted), BATCH):
        done += _rebuild(wanted[start : start + BATCH])
    return done


def _rebuild(ids: list[int]) -> int:
    stamps = dict(
        Server.objects.filter(pk__in=ids)
        .exclude(last_report_hash="")
        .values_list("pk", "last_report_hash")
    )
    if not stamps:
        return 0
    servers = Server.objects.filter(pk__in=list(stamps)).values("pk")
    gpus: dict[int, list[tuple]] = defaultdict(list)
    for gpu_id, server_id, index, name, memory, numa, state in gpu_rows(servers):
        gpus[server_id].append((gpu_id, index, name, memory, numa, state))
    migs: dict[int, list[tuple]] = defaultdict(list)
    for uuid, gpu_id, server_id, profile, memory in mig_rows(servers):
        migs[server_id].append((uuid, gpu_id, profile, memory))
    classes, pairs = link_rows(servers)
    now = timezone.now()
    rows = [
        ServerPlacement(
            server_id=server_id,
            stamp=stamp,
            built_at=now,
            **summary_of(
                gpus.get(server_id, []),
                classes.get(server_id, set()),
                pairs.get(server_id, {}),
                migs.get(server_id, []),
            ),
        )
        for server_id, stamp in stamps.items()
    ]
    built = ServerPlacement.objects.filter(
        server_id=OuterRef("pk"), stamp=OuterRef("last_report_hash")
    ).values("shape")[:1]
    with transaction.atomic():
        ServerPlacement.objects.filter(Q(server_id__in=list(stamps))).delete()
        ServerPlacement.objects.bulk_create(rows, batch_size=BATCH)
        # published only where the server's facts are still those it was built from: a report
        # applied meanwhile has emptied it, and it stays empty until the next rebuild
        Server.objects.filter(pk__in=list(stamps)).update(
            placement_shape=Coalesce(Subquery(built), Value(""))
        )
    return len(rows)
