"""Lists cut into batches: an `IN (...)` over 200,000 ids is one query per batch, and stays
under SQLite's and PostgreSQL's parameter limits."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """`items` in slices of at most `size`, in order."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
