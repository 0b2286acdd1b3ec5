"""Per-leaf placement summaries (`placement.LeafPlacement`): the write side.

Built from the cables (`selectors.cable_places`, the same read a question without fresh
summaries makes, grouped by `leaves.leaf_summaries`), stamped with the fabric revision read
before the cables: a fabric change made meanwhile moves the revision past the stamp, so the
reads take the cables until the next rebuild. Beat runs it with the per-server summaries
(`placement.tasks.refresh_placement_summaries`); `manage.py placement_summaries` too.
"""

from __future__ import annotations

import json

from django.db import transaction
from django.utils import timezone

from .leaves import leaf_summaries
from .models import LeafPlacement
from .selectors import cable_places, fabric_revision, leaf_rows

BATCH = 2000


def leaf_summaries_refresh(*, force: bool = False) -> int | None:
    """Rebuild the leaf summaries when the fabric revision moved past their stamp (or
    `force`); the rows written, None when they were fresh (two queries then). Bulk: the
    cable reads, one delete, one insert per 2,000 rows, in one transaction."""
    revision = fabric_revision()
    stamp, _ = leaf_rows()
    if stamp == revision and not force:
        return None
    now = timezone.now()
    rows = [
        LeafPlacement(
            leaf=s.leaf,
            leaf_name=s.leaf_name[:300],
            spine=s.spine or "",
            spine_name=s.spine_name[:300],
            servers=json.dumps(list(s.servers), separators=(",", ":")),
            stamp=revision,
            built_at=now,
        )
        for s in leaf_summaries(cable_places())
    ]
    marker = LeafPlacement(leaf="", servers="[]", stamp=revision, built_at=now)
    with transaction.atomic():
        LeafPlacement.objects.all().delete()
        LeafPlacement.objects.bulk_create([marker, *rows], batch_size=BATCH)
    return len(rows)
