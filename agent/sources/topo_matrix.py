"""Parse `nvidia-smi topo -m`: the GPU/NIC link matrix, CPU and NUMA affinity, NIC legend.

Handles what real captures contain: ANSI underline escapes around the header, tabs or runs
of spaces as separators, `X` on the diagonal, `NV<n>`, `PIX`/`PXB`/`PHB`/`NODE`/`SYS` (and
the pre-2018 `SOC` for SYS), NIC columns named `NIC<n>` with a `NIC Legend` that maps them
to device names (`mlx5_0`, or netdev-style `ibp14s0`), older matrices that name the NICs
(`mlx5_0`) in the header directly, and affinity columns that may be absent or `N/A`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..nvml import parse_cpu_list
from .nvidia_smi_xml import SmiParseError

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_CLASS = re.compile(r"^(X|NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)$")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass
class TopoGpu:
    index: int
    cpu_affinity: str | None = None
    numa_affinity: str | None = None

    @property
    def numa_node(self) -> int | None:
        """The NUMA node when the GPU is near exactly one (`0`), else None (`0-1`, `N/A`)."""
        value = self.numa_affinity
        return int(value) if value and value.isdigit() else None


@dataclass
class TopoMatrix:
    gpus: list[TopoGpu] = field(default_factory=list)
    nics: list[str] = field(default_factory=list)
    links: list[tuple[str, str, str]] = field(default_factory=list)  # (a, b, class)
    warnings: list[str] = field(default_factory=list)


def _is_header(line: str) -> bool:
    """The header names GPU0 followed by another column; a row has GPU0 followed by X."""
    tokens = line.split()
    if "GPU0" not in tokens:
        return False
    after = tokens.index("GPU0") + 1
    return after >= len(tokens) or tokens[after] != "X"


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Parse the matrix. Raises SmiParseError when no GPU header is found."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if _is_header(line)), None)
    if header_at is None:
        raise SmiParseError("no `nvidia-smi topo -m` header (GPU0 ...) found")
    header = lines[header_at]
    extra = [name for name in _AFFINITY_COLUMNS if name in header]
    columns_part = header
    for name in extra:
        columns_part = columns_part.replace(name, " ")
    columns = columns_part.split()
    legend: dict[str, str] = {}
    for line in lines[header_at + 1 :]:
        match = _LEGEND.match(line)
        if match:
            legend[match.group(1)] = match.group(2)

    def end(label: str) -> str:
        if label.startswith("GPU") and label[3:].isdigit():
            return f"gpu:{int(label[3:])}"
        return f"nic:{legend.get(label, label)}"

    matrix = TopoMatrix()
    matrix.nics = [legend.get(c, c) for c in columns if not c.startswith("GPU")]
    cells: dict[tuple[str, str], str] = {}
    for line in lines[header_at + 1 :]:
        tokens = line.split()
        if not tokens or tokens[0] not in columns:
            if tokens and tokens[0].rstrip(":") == "Legend":
                break
            continue
        row = tokens[0]
        values = tokens[1 : 1 + len(columns)]
        tail = tokens[1 + len(columns) :]
        for column, value in zip(columns, values, strict=False):
            if column == row:
                continue
            if not _CLASS.match(value):
                matrix.warnings.append(f"topo -m: unknown link class {value!r} ({row}-{column})")
                continue
            cells[(row, column)] = "SYS" if value == "SOC" else value
        if row.startswith("GPU"):
            info = dict(zip(extra, tail, strict=False))
            cpus = info.get("CPU Affinity")
            matrix.gpus.append(
                TopoGpu(
                    index=int(row[3:]),
                    cpu_affinity=cpus if cpus and parse_cpu_list(cpus) else None,
                    numa_affinity=info.get("NUMA Affinity")
                    if info.get("NUMA Affinity") not in (None, "N/A")
                    else None,
                )
            )
    seen: set[tuple[str, str]] = set()
    for pos, a in enumerate(columns):
        for b in columns[pos + 1 :]:
            value = cells.get((a, b)) or cells.get((b, a))
            if value is None or value == "X" or (a, b) in seen:
                continue
            seen.add((a, b))
            matrix.links.append((end(a), end(b), value))
    if not matrix.gpus:
        raise SmiParseError("the topo -m matrix has no GPU rows")
    return matrix
