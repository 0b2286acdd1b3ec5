"""The types every nvidia-smi parser shares: what a capture says (`SmiLog`), the error for
input that is not nvidia-smi output (`SmiParseError`), and the tree of plain `nvidia-smi -q`
(`Section`), which the health fields read too.

One module below the parsers (`nvidia_smi_xml`, `nvidia_smi_text`, `nvidia_smi_list`,
`smi_health`, `topo_matrix`), so that none of them imports another for a type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .values import clean


class SmiParseError(ValueError):
    """The input is not nvidia-smi output this parser can read."""


@dataclass
class SmiLog:
    """What one nvidia-smi capture says: versions and GPUs (report fields, uuid maybe None).

    `cut` says why the capture ends early (a full disk, a killed redirect), `incomplete` which
    of `gpus` (positions) it holds only in part; `partial_reason` says why even a whole
    capture describes less than the machine has (`nvidia-smi -L`). `trimmed` is the reason
    when it lists fewer GPUs than nvidia-smi says are attached.
    """

    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    gpus: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    cut: str | None = None
    incomplete: list[int] = field(default_factory=list)
    partial_reason: str | None = None

    @property
    def trimmed(self) -> str | None:
        if self.attached_gpus is None or self.attached_gpus <= len(self.gpus):
            return None
        return (
            f"nvidia-smi says {self.attached_gpus} GPUs are attached but the capture describes "
            f"{len(self.gpus)}"
        )


@dataclass
class Section:
    """A header and what is indented below it: (label, str | Section) in file order."""

    label: str
    items: list[tuple[str, Any]] = field(default_factory=list)

    def get(self, *path: str) -> Any:
        """The first item along `path` (labels compared case-insensitively)."""
        node: Any = self
        for label in path:
            if not isinstance(node, Section):
                return None
            want = label.lower()
            node = next((value for key, value in node.items if key.lower() == want), None)
        return node

    def text(self, *paths: tuple[str, ...] | str) -> str | None:
        """The first meaningful value among alternative paths (a str is a one-label path)."""
        for path in paths:
            parts = (path,) if isinstance(path, str) else path
            value = self.get(*parts)
            if isinstance(value, str) and clean(value) is not None:
                return clean(value)
        return None

    def all(self, label: str) -> list[Section]:
        want = label.lower()
        return [v for k, v in self.items if k.lower() == want and isinstance(v, Section)]
