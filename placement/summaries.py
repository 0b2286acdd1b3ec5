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

Every value the report schema allows is taken: an unknown (null) memory, NUMA node, name or
profile is kept unknown and sorts before every known one, never compared with it. One server
whose summary cannot be built never stops the others: its failure is logged with its id and
the error's type, and it is stamped failed (`FAILED`) with the report hash it failed on, so
the reads keep taking its rows and the periodic refresh does not retry it until its report
changes (`stale_servers`); naming it (`server_ids`, the backfill) retries it at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import OperationalError, transaction
from django.db.models import F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from inventory.models import Server

from .models import ServerPlacement
from .selectors import gpu_rows, link_rows, mig_rows

logger = logging.getLogger(__name__)

BATCH = 2000

FAILED = "!failed:"
"""How a summary that could not be built starts its `gpus` (then the error's type): stamped
with the report hash it failed on and with no shape, so every read takes the server's rows
(`selectors.fresh_summaries` skips a summary without a shape) and `stale_servers` leaves it
out until the server's report changes. A built summary's `gpus` is JSON, never this."""


def stale_servers() -> QuerySet:
    """Servers with a report hash and no summary built from it, or its shape not published
    (a `server_id` values query); not those whose summary failed on their current report."""
    current = ServerPlacement.objects.filter(stamp=F("server__last_report_hash"))
    fresh = current.exclude(shape="").values("server_id")
    failed = current.filter(shape="", gpus__startswith=FAILED).values("server_id")
    return (
        Server.objects.exclude(last_report_hash="")
        .filter(~Q(pk__in=fresh) | Q(placement_shape=""))
        .exclude(pk__in=failed)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _unknown_first(row: Iterable[Any]) -> list[tuple[bool, Any]]:
    """A sort key for a row that may hold None (an unknown memory, NUMA node, profile):
    unknown before known, never compared with it; rows without one sort as themselves, so a
    shape's digest is the one it always was."""
    return [(False, 0) if value is None else (True, value) for value in row]


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
        "migs": json.dumps(
            sorted((list(m) for m in migs), key=_unknown_first), separators=(",", ":")
        ),
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
    by_index = sorted(
        ([index.get(a, -1), index.get(b, -1), c] for (a, b), c in pairs.items()), key=_unknown_first
    )
    devices = sorted(([index.get(m[1], -1), m[2], m[3]] for m in migs), key=_unknown_first)
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
    the number rebuilt. Five queries and three writes per batch of 2,000 servers.

    A server whose summary cannot be built is stamped failed (`FAILED`) and not counted; the
    rest are rebuilt. A batch whose reads or writes fail is rebuilt one server at a time, so
    a row no server's summary can take costs its own server alone. A lost database connection
    (`OperationalError`) is raised: the task retries it (`core.tasks.retry_policy`).
    """
    wanted = list(server_ids) if server_ids is not None else list(stale_servers()[:limit])
    done = 0
    for start in range(0, len(wanted), BATCH):
        done += _rebuild_isolated(wanted[start : start + BATCH])
    return done


def _rebuild_isolated(ids: list[int]) -> int:
    try:
        return _rebuild(ids)
    except OperationalError:
        raise
    except Exception as exc:
        if len(ids) == 1:
            _mark_failed(ids[0], exc)
            return 0
        logger.warning(
            "placement summaries: a batch of %d servers failed (%s); rebuilding one at a time",
            len(ids),
            type(exc).__name__,
        )
    return sum(_rebuild_isolated([server_id]) for server_id in ids)


def _log_failure(server_id: int, exc: Exception) -> None:
    # the error's type, never its text: a message may quote the row's values
    logger.error(
        "placement summary of server %s could not be built (%s); its rows are read until "
        "its report changes",
        server_id,
        type(exc).__name__,
    )


def _failed(server_id: int, stamp: str, exc: Exception, now: Any) -> ServerPlacement:
    _log_failure(server_id, exc)
    return ServerPlacement(
        server_id=server_id,
        stamp=stamp,
        built_at=now,
        shape="",
        gpus=f"{FAILED}{type(exc).__name__}"[:200],
        usable=0,
        known=0,
    )


def _mark_failed(server_id: int, exc: Exception) -> None:
    """Stamp `server_id`'s summary failed on its current report (reads take its rows)."""
    stamp = Server.objects.filter(pk=server_id).values_list("last_report_hash", flat=True).first()
    if not stamp:
        _log_failure(server_id, exc)
        return
    with transaction.atomic():
        ServerPlacement.objects.filter(server_id=server_id).delete()
        _failed(server_id, stamp, exc, timezone.now()).save(force_insert=True)
        Server.objects.filter(pk=server_id).update(placement_shape="")


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
    rows = []
    for server_id, stamp in stamps.items():
        try:
            built = summary_of(
                gpus.get(server_id, []),
                classes.get(server_id, set()),
                pairs.get(server_id, {}),
                migs.get(server_id, []),
            )
        except Exception as exc:  # one server's rows never stop the others' summaries
            rows.append(_failed(server_id, stamp, exc, now))
            continue
        rows.append(ServerPlacement(server_id=server_id, stamp=stamp, built_at=now, **built))
    published = ServerPlacement.objects.filter(
        server_id=OuterRef("pk"), stamp=OuterRef("last_report_hash")
    ).values("shape")[:1]
    with transaction.atomic():
        ServerPlacement.objects.filter(Q(server_id__in=list(stamps))).delete()
        ServerPlacement.objects.bulk_create(rows, batch_size=BATCH)
        # published only where the server's facts are still those it was built from: a report
        # applied meanwhile has emptied it, and it stays empty until the next rebuild (a
        # failed summary has no shape: empty too)
        Server.objects.filter(pk__in=list(stamps)).update(
            placement_shape=Coalesce(Subquery(published), Value(""))
        )
    return sum(1 for row in rows if row.shape)
