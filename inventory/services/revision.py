"""Revision counters that tell higher layers the inventory (or the node sets) changed."""

from __future__ import annotations

from django.db.models import F
from django.utils import timezone

from ..models import Revision


def revision_bump(*, name: str) -> None:
    """Move the counter; one UPDATE (an INSERT the first time)."""
    updated = Revision.objects.filter(name=name).update(
        value=F("value") + 1, changed_at=timezone.now()
    )
    if not updated:
        Revision.objects.get_or_create(name=name, defaults={"value": 1})


def revision_get(*, name: str) -> int:
    return Revision.objects.filter(name=name).values_list("value", flat=True).first() or 0
