"""Parse `nvidia-smi topo -m`: the GPU/NIC link matrix, CPU and NUMA affinity, NIC legend.

Cells are read by their place under the header, never by splitting on whitespace: an
empty cell (a VM's empty CPU Affinity) would otherwise shift the NUMA Affinity into its
place. nvidia-smi separates cells with tabs, so a row's cells are its tab-separated
fields; a copy whose tabs became spaces (a terminal, a web page) is read back by 8-column
tab stops; text aligned some other way falls back to whitespace.

The matrix cells map one-to-one onto the header's columns. The affinity cells do not:
drivers pad them with extra tabs, and not the same way (current ones print
`CPU\\tNUMA\\t\\tGPU-NUMA`, older ones `CPU\\t\\tNUMA\\t\\t...`), so the padding is inferred
once per file as the one that leaves only padding cells empty in every GPU row.

Also handled: ANSI escapes and a byte-order mark (the shared decoder), `X` on the
diagonal, `NV<n>`, `PIX`/`PXB`/`PHB`/`NODE`/`SYS` (and the pre-2018 `SOC` for SYS), NIC
columns named `NIC<n>` with a `NIC Legend` mapping them to device names (`mlx5_0`, or
netdev-style `ibp14s0`), and older matrices that name the NICs in the header directly.

A capture cut short never gives a quietly smaller server: the GPUs are the header's GPU
columns, and missing or short rows and a missing NIC legend become warnings.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from ..nvml import parse_cpu_list
from .identify import TOPOLOGY, wrong_output
from .smi_types import SmiParseError
from .text import TextDecodeError, decode_text

TAB_WIDTH = 8
_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_CLASS = re.compile(r"^(X|NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)$")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_TOKEN = re.compile(r"\S+")


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
    """What one matrix says. `cut` says why it is known to end early (rows missing or short,
    NIC columns the legend does not name), and `unnamed_nics` are those columns (`NIC3`):
    their links are known, the NICs' names are not."""

    gpus: list[TopoGpu] = field(default_factory=list)
    nics: list[str] = field(default_factory=list)
    links: list[tuple[str, str, str]] = field(default_factory=list)  # (a, b, class)
    warnings: list[str] = field(default_factory=list)
    cut: str | None = None
    unnamed_nics: list[str] = field(default_factory=list)


def is_header(line: str) -> bool:
    """The header names GPU0 followed by another column; a row has GPU0 followed by X."""
    tokens = line.split()
    if "GPU0" not in tokens:
        return False
    after = tokens.index("GPU0") + 1
    return after >= len(tokens) or tokens[after] != "X"


def _joined(header: str) -> str:
    """The header with the spaces inside column names (`CPU Affinity`) made NULs, so each
    name is one token (the decoder refused real NULs)."""
    for name in _AFFINITY_COLUMNS:
        header = header.replace(name, name.replace(" ", "\x00"))
    return header


def _is_tab_expanded(header: str) -> bool:
    """True for a header whose tabs became spaces: every column starts on a tab stop."""
    starts = [m.start() for m in _TOKEN.finditer(_joined(header))]
    return len(starts) > 1 and all(start % TAB_WIDTH == 0 for start in starts)


def _cells(line: str, tab_expanded: bool) -> list[str]:
    """A line's cells in order, empty ones kept (see the module docstring)."""
    if "\t" in line:
        return [cell.strip() for cell in line.split("\t")]
    if not tab_expanded:
        return line.split()
    cells: list[str] = []
    end: int | None = None
    for match in _TOKEN.finditer(line):
        if end is None:
            cells.extend([""] * (match.start() // TAB_WIDTH))
        else:
            # a tab from `end` reaches the next stop; each further tab is an empty cell
            stop = (end // TAB_WIDTH + 1) * TAB_WIDTH
            cells.extend([""] * max(0, (match.start() - stop) // TAB_WIDTH))
        cells.append(match.group())
        end = match.end()
    return cells


def _header_cells(line: str, tab_expanded: bool) -> list[str]:
    """The header's column names by cell; the first cell (over the row labels) is ""."""
    cells = [cell.replace("\x00", " ") for cell in _cells(_joined(line), tab_expanded)]
    if cells and cells[0]:
        cells.insert(0, "")  # a header without the leading tab over the row labels
    while cells and not cells[-1]:
        cells.pop()
    return cells


def _padding_fits(rest: list[str], padding: tuple[int, ...]) -> bool:
    """True when `rest` (a row's cells after the matrix) has values only where `padding`
    (tabs after each affinity value but the last) puts them."""
    at = 0
    for tabs in (*padding, 1):
        at += 1
        for _ in range(tabs - 1):
            if at < len(rest) and rest[at]:
                return False
            at += 1
    return all(not cell for cell in rest[at:])


def _affinity_values(rest: list[str], padding: tuple[int, ...]) -> list[str]:
    values = []
    at = 0
    for tabs in (*padding, 1):
        values.append(rest[at] if at < len(rest) else "")
        at += tabs
    return values


def _choose_padding(rows: list[list[str]], count: int) -> tuple[int, ...]:
    """The padding that fits most GPU rows; current drivers' (1, 2) first on a tie."""
    if count <= 1:
        return ()
    candidates = sorted(
        itertools.product((1, 2), repeat=count - 1),
        key=lambda p: (p != (1, 2)[: count - 1], p != (2,) * (count - 1), p),
    )
    return max(candidates, key=lambda p: sum(_padding_fits(rest, p) for rest in rows))


def _column_range(labels: list[str]) -> str:
    return ", ".join(labels) if len(labels) <= 4 else f"{labels[0]} ... {labels[-1]}"


def parse_topo_matrix(data: str | bytes) -> TopoMatrix:
    """Parse the matrix. Raises SmiParseError when no GPU header is found."""
    try:
        text = decode_text(data)
    except TextDecodeError as exc:
        raise SmiParseError(str(exc)) from None
    lines = text.split("\n")
    header_at = next((i for i, line in enumerate(lines) if is_header(line)), None)
    if header_at is None:
        reason = wrong_output(text, (TOPOLOGY,))
        raise SmiParseError(reason or "no `nvidia-smi topo -m` header (GPU0 ...) found")
    last_content = max(i for i, line in enumerate(lines) if line.strip())
    unterminated = not text.endswith("\n")  # the file may end inside its last line
    if header_at == last_content and unterminated:
        raise SmiParseError("the file ends inside the topo -m header: it was cut short")
    tab_expanded = "\t" not in lines[header_at] and _is_tab_expanded(lines[header_at])
    header = _header_cells(lines[header_at], tab_expanded)
    extra = [name for name in header if name in _AFFINITY_COLUMNS]
    columns = [name for name in header[1:] if name not in _AFFINITY_COLUMNS]
    matrix = TopoMatrix()
    legend: dict[str, str] = {}
    for at in range(header_at + 1, len(lines)):
        match = _LEGEND.match(lines[at])
        if match:
            legend[match.group(1)] = match.group(2)
            if at == last_content and unterminated:
                matrix.warnings.append(
                    f"topo -m: the file ends inside the NIC Legend line of {match.group(1)} "
                    "(no final newline): that NIC's name may be cut short"
                )

    def end(label: str) -> str:
        if label.startswith("GPU") and label[3:].isdigit():
            return f"gpu:{int(label[3:])}"
        return f"nic:{legend.get(label, label)}"

    matrix.nics = [legend.get(c, c) for c in columns if not c.startswith("GPU")]
    cells: dict[tuple[str, str], str] = {}
    short_rows: list[str] = []
    affinity_rows: dict[str, list[str]] = {}
    for at in range(header_at + 1, len(lines)):
        row_cells = _cells(lines[at], tab_expanded)
        label = row_cells[0] if row_cells else ""
        if label not in columns or label in affinity_rows:
            if label.rstrip(":") == "Legend":
                break
            continue
        values = row_cells[1 : 1 + len(columns)]
        rest = row_cells[1 + len(columns) :]
        if at == last_content and unterminated:
            short_rows.append(label)  # the file ends inside this row
            if not lines[at].endswith(("\t", " ")):
                # ... perhaps inside its last cell: drop it (the pair's other row has it)
                filled = [i for i, cell in enumerate(rest) if cell]
                if filled:
                    rest = rest[: filled[-1]]
                else:
                    values = values[:-1]
        elif len(values) < len(columns):
            short_rows.append(label)
        affinity_rows[label] = rest
        for column, value in zip(columns, values, strict=False):
            if column == label or not value:
                continue
            if not _CLASS.match(value):
                matrix.warnings.append(f"topo -m: unknown link class {value!r} ({label}-{column})")
                continue
            cells[(label, column)] = "SYS" if value == "SOC" else value

    gpu_labels = [c for c in columns if c.startswith("GPU") and c[3:].isdigit()]
    padding = _choose_padding(
        [rest for label, rest in affinity_rows.items() if label in gpu_labels], len(extra)
    )
    for label in sorted(gpu_labels, key=lambda c: int(c[3:])):
        gpu = TopoGpu(index=int(label[3:]))
        affinity = affinity_rows.get(label)
        if affinity is not None and extra:
            if not _padding_fits(affinity, padding):
                affinity = [cell for cell in affinity if cell]  # unknown padding: values in order
            info = dict(zip(extra, _affinity_values(affinity, padding), strict=True))
            cpus = info.get("CPU Affinity")
            numa = info.get("NUMA Affinity")
            gpu.cpu_affinity = cpus if cpus and parse_cpu_list(cpus) else None
            gpu.numa_affinity = numa if numa and numa != "N/A" else None
        matrix.gpus.append(gpu)

    cut: list[str] = []
    missing = [label for label in columns if label not in affinity_rows]
    if missing:
        cut.append(f"the rows of {_column_range(missing)} are missing")
        matrix.warnings.append(
            f"topo -m: the header names {len(columns)} devices but the rows of "
            f"{_column_range(missing)} are missing: the capture may be cut short"
        )
    if short_rows:
        cut.append(f"the row of {_column_range(short_rows)} stops early")
        matrix.warnings.append(
            f"topo -m: the row of {_column_range(short_rows)} stops before the header's last "
            "column: the capture may be cut short"
        )
    matrix.unnamed_nics = [c for c in columns if re.fullmatch(r"NIC\d+", c) and c not in legend]
    if matrix.unnamed_nics:
        cut.append(f"the NIC Legend does not name {_column_range(matrix.unnamed_nics)}")
        matrix.warnings.append(
            f"topo -m: no NIC Legend entry for {_column_range(matrix.unnamed_nics)} (the "
            "capture may be cut short); those NICs' names are unknown"
        )
    if cut:
        matrix.cut = f"the topo -m matrix was cut short: {'; '.join(cut)}"

    complete = {label for label in affinity_rows if label not in short_rows}
    seen: set[tuple[str, str]] = set()
    for pos, a in enumerate(columns):
        for b in columns[pos + 1 :]:
            # prefer the cell of a complete row: a short row's cells may be cut
            pairs = sorted(((a, b), (b, a)), key=lambda pair: pair[0] not in complete)
            link = next((cells[p] for p in pairs if p in cells), None)
            if link is None or link == "X" or (a, b) in seen:
                continue
            seen.add((a, b))
            matrix.links.append((end(a), end(b), link))
    if not matrix.gpus:
        raise SmiParseError("the topo -m matrix has no GPU columns")
    return matrix
