"""Watermarks of the periodic scans: up to when each has read findings."""

from __future__ import annotations

from datetime import datetime

from ..models import Watermark


def watermark_get(name: str) -> datetime | None:
    return Watermark.objects.filter(name=name).values_list("at", flat=True).first()


def watermark_set(name: str, at: datetime) -> None:
    Watermark.objects.update_or_create(name=name, defaults={"at": at})
