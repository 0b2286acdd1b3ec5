"""Generic filters every app's FilterSets build on: bounded ids, whole numbers, UTC times.

Each turns input that the database would refuse into a field-level 400, never a 500.
"""

from __future__ import annotations

from datetime import UTC

import django_filters
from django import forms

ID_MAX = 2**63 - 1  # a BigAutoField


class IdFilter(django_filters.NumberFilter):
    """A row id: a whole number that fits the column, else a field-level 400 (never an overflow)."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", ID_MAX)
        super().__init__(*args, **kwargs)


class WholeNumberFilter(django_filters.NumberFilter):
    """A count or code: a whole number within `max_value` (default 32-bit), else a 400."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", 2**31 - 1)
        super().__init__(*args, **kwargs)


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 time turned into UTC before the query: PostgreSQL refuses offsets beyond
    ±15:59 that ISO 8601 allows, and a 500 must never come of a filter."""

    def filter(self, qs, value):
        if value is not None:
            value = value.astimezone(UTC)
        return super().filter(qs, value)
