"""Per-node ``sinfo`` listings: ``sinfo -N`` with ``-o``/``--format`` or ``-O``/``--Format``.

``sinfo -N`` prints one row per node and partition; a listing whose rows name each node
with its GRES (``%N``/``%n`` or NodeList/NodeHost, and ``%G``/Gres) is a whole node set:
rows of one node merge (partitions joined), states map onto the shared vocabulary
(``drained*`` is drained and not responding). Listings that aggregate nodes (``%D``
counts, hostlist ranges without ``-N``) cannot say which node has which GPUs and are
refused with the commands that can.

Columns are known by the header sinfo prints (NODELIST, HOSTNAMES, GRES, GRES_USED,
STATE, PARTITION, CPUS, MEMORY, ...), read as whitespace-separated values, as ``|``
separated ones, or by the header's positions when values hold spaces (REASON) or were
glued by ``-O``'s fixed widths. ``-O`` cuts values at the field width (20 by default):
a value of a used column that fills its field is refused as possibly cut; each field is
checked against its own width (where the next column starts), header or not.

Without a header (``-h``) the columns are recognised by content, a documented convention:
GRES strings (the first is Gres; one with ``IDX:`` is GresUsed), Slurm state names, and
plain words. Of two word columns, a ``*`` (the default partition) marks the partitions;
else the node names are the column whose rows of one name agree on GRES and state, else
the one whose names carry digits where the other's do not; what stays ambiguous is
refused (see ``_node_and_partition``). Numbers are ignored. The header makes it exact,
so errors suggest printing it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import pairwise

from clusters.parsers.records import NodeRecord, Snapshot, SnapshotFormatError
from clusters.parsers.slurm_common import build_node, clean, split_top_level

FORMAT = "slurm-sinfo-text"

WORKING_COMMANDS = (
    "sinfo -N -O NodeList,Partition,Gres,GresUsed,StateLong (widths as needed, e.g. Gres:60), "
    'sinfo -N -o "%N %P %G %T", scontrol show node, or sinfo --json'
)

# sinfo's column headers (-o letters and -O names print the same ones) -> field
_HEADERS = {
    "NODELIST": "name",
    "HOSTNAMES": "hostname",
    "NODE_ADDR": "address",
    "GRES": "gres",
    "GRES_USED": "gres_used",
    "STATE": "state",
    "STATECOMPLETE": "state",
    "PARTITION": "partition",
    "CPUS": "cpus",
    "MEMORY": "memory",
    "NODES": "count",
    "AVAIL_FEATURES": "features",
    "REASON": "reason",
}
# Headers of other sinfo columns, so a header row is known as one (values unused).
_OTHER_HEADERS = frozenset(
    {
        "ACTIVE_FEATURES", "ALLOCMEM", "AVAIL", "CLUSTER", "COMMENT", "CPU_LOAD",
        "CPUS(A/I/O/T)", "DEFAULTTIME", "EXTRA", "FREE_MEM", "GROUPS", "JOB_SIZE",
        "MAX_CPUS_PER_NODE", "OVERSUBSCRIBE", "PRIO_JOB_FACTOR", "PRIORITY_TIER", "ROOT",
        "S:C:T", "SOCKETS", "CORES", "THREADS", "TIMELIMIT", "TIMESTAMP", "TMP_DISK",
        "USER", "WEIGHT", "PORT", "VERSION", "RESERVATION", "PREEMPT_MODE", "GRES_DRAIN",
        "AVAIL_FE",
    }
)  # fmt: skip
_DEFAULT_WIDTH = 20  # sinfo -O's field width when none is given
_USED_FIELDS = ("name", "hostname", "gres", "gres_used", "state", "partition")

_GRES_ENTRY = re.compile(r"^[A-Za-z][\w.\-]*(?::[^:(),\s]+)?:\d+[KMGTP]?(?:\([^()]*\))?$")
# What starts like a GRES (`gpu:...`), even glued to the next value by -O's fixed widths.
_GRES_LIKE = re.compile(r"^(?:\(null\)|[A-Za-z][\w.\-]*:\S+)$", re.IGNORECASE)
_STATE_WORDS = (
    "alloc|allocated|blocked|comp|completing|down|drain|drained|draining|drng|fail|failg|"
    "failing|future|futr|idle|inval|maint|mix|mixed|mixed-|npc|planned|plnd|pow_dn|pow_up|"
    "powered_down|powering_down|powering_up|reboot|reboot_issued|reboot_requested|reserved|"
    "resv|unk|unknown|cloud|perfctrs|no_respond|not_responding"
)
_STATE = re.compile(
    rf"^(?:{_STATE_WORDS})[*~#%!@^$-]*(?:\+(?:{_STATE_WORDS}|[a-z_]+)[*~#%!@^$-]*)*$",
    re.IGNORECASE,
)
_WORD = re.compile(r"^[A-Za-z0-9][\w.\-]*\*?$")
_DATE_LINE = re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \d{4}\s*$")


@dataclass
class _Row:
    """One row's values by field; `line` counts from 1 for messages."""

    line: int
    values: dict[str, str] = field(default_factory=dict)


def _is_gres(value: str) -> bool:
    """A GRES string as sinfo prints it: ``(null)`` or ``gpu:h100:8(S:0-1),shard:...:4``."""
    if value.lower() == "(null)":
        return True
    entries = split_top_level(value)
    return bool(entries) and all(_GRES_ENTRY.match(e) for e in entries)


def _header_names(line: str) -> list[tuple[int, str]] | None:
    """(start, name) of each header cell, or None when the line is not a sinfo header."""
    cells = [(m.start(), m.group()) for m in re.finditer(r"[^\s|]+", line)]
    known = [name for _, name in cells if name in _HEADERS or name in _OTHER_HEADERS]
    if len(cells) < 2 or len(known) != len(cells):
        return None
    return cells


def looks_like(text: str) -> bool:
    """True for a sinfo listing: a header of sinfo column names (after sinfo -l's date
    line), or rows of plain values with a GRES column."""
    lines = [line for line in text.split("\n") if line.strip()][:3]
    if not lines:
        return False
    if _DATE_LINE.match(lines[0]) and len(lines) > 1:
        lines = lines[1:]
    if _header_names(lines[0]) is not None:
        return True
    rows = [line.split() for line in lines]
    if any(len(r) < 2 or any("=" in v for v in r) for r in rows):
        return False
    return any(all(_GRES_LIKE.match(r[i]) for r in rows if i < len(r)) for i in range(len(rows[0])))


def _refuse_aggregated(why: str) -> SnapshotFormatError:
    return SnapshotFormatError(
        f"this sinfo listing aggregates nodes ({why}), so it cannot say which node has which "
        f"GRES. Per-node listings that can: {WORKING_COMMANDS}"
    )


def _split_rows(
    lines: list[tuple[int, str]], header: list[tuple[int, str]], header_line: str
) -> list[list[str]]:
    """Each row's cells in header order: by `|`, by whitespace (one REASON column may hold
    spaces), or by the header's positions when the header is padded to fixed widths (-O)."""
    names = [name for _, name in header]
    if "|" in header_line:
        return [[cell.strip() for cell in line.split("|")] for _, line in lines]
    split = [line.split() for _, line in lines]
    padded = header_line.endswith(" ") or "  " in header_line.strip()
    if all(len(cells) == len(names) for cells in split):
        if padded and all(
            [m.start() for m in re.finditer(r"\S+", line)] == [s for s, _ in header]
            for _, line in lines
        ):
            _check_widths(lines, header, header_line)  # values that fill a field may be cut
        return split
    if not padded and names.count("REASON") == 1:
        at = names.index("REASON")
        if all(len(cells) >= len(names) for cells in split):
            tail = len(names) - at - 1
            return [
                [*cells[:at], " ".join(cells[at : len(cells) - tail]), *cells[len(cells) - tail :]]
                for cells in split
            ]
    if not padded:
        return split  # the row-length check names the line
    _check_widths(lines, header, header_line)
    starts: list[int | None] = [start for start, _ in header]
    starts.append(None)
    return [
        [line[starts[i] : starts[i + 1]].strip() for i in range(len(names))] for _, line in lines
    ]


def _check_widths(
    lines: list[tuple[int, str]], header: list[tuple[int, str]], header_line: str
) -> None:
    """Refuse a used column whose value fills its fixed-width field (sinfo -O cuts there).

    A field ends where the next header begins; the last one where the header's padding
    ends, when the header kept it."""
    ends: list[int | None] = [start for start, _ in header[1:]]
    ends.append(len(header_line) if header_line.endswith(" ") else None)
    for (start, name), end in zip(header, ends, strict=True):
        if end is None or _HEADERS.get(name) not in _USED_FIELDS:
            continue
        for number, line in lines:
            if len(line) >= end and not line[end - 1].isspace() and line[start:end].strip():
                raise SnapshotFormatError(
                    f"sinfo line {number}: a {name} value fills its {end - start}-character "
                    "field, and sinfo -O cuts values at the field width; give the field a "
                    "width (e.g. Gres:60) or a suffix (Gres: ) so values are whole"
                )


def _rows_with_header(
    lines: list[tuple[int, str]], header: list[tuple[int, str]], header_line: str
) -> list[_Row]:
    names = [name for _, name in header]
    rows = []
    for (number, _line), cells in zip(lines, _split_rows(lines, header, header_line), strict=True):
        if len(cells) != len(names):
            raise SnapshotFormatError(
                f"sinfo line {number} has {len(cells)} values for {len(names)} columns "
                "(cut short, or a value with spaces: print with -O widths or a | separator)"
            )
        values = {}
        for name, cell in zip(names, cells, strict=True):
            if name in _HEADERS and _HEADERS[name] not in values:
                values[_HEADERS[name]] = cell
        rows.append(_Row(line=number, values=values))
    return rows


def _rows_without_header(lines: list[tuple[int, str]]) -> list[_Row]:
    """Columns recognised by content (see the module docstring)."""
    split = [line.split() for _, line in lines]
    _check_fixed_widths(lines)
    width = len(split[0])
    for (number, _line), cells in zip(lines, split, strict=True):
        if len(cells) != width:
            raise SnapshotFormatError(
                f"sinfo line {number} has {len(cells)} values where line {lines[0][0]} has "
                f"{width}; print the header (drop -h) so columns are known by name"
            )
    columns = [[cells[i] for cells in split] for i in range(width)]
    kinds: dict[str, int] = {}
    gres = [i for i, col in enumerate(columns) if all(_is_gres(v) for v in col)]
    real = [i for i in gres if any(v.lower() != "(null)" for v in columns[i])]
    used = [i for i in real if any("IDX:" in v for v in columns[i])]
    configured = [i for i in (real or gres) if i not in used]
    if configured:
        kinds["gres"] = configured[0]
    if used:
        kinds["gres_used"] = used[0]
    states = [
        i for i, col in enumerate(columns) if i not in gres and all(_STATE.match(v) for v in col)
    ]
    if states:
        kinds["state"] = states[0]
    counts = [i for i, col in enumerate(columns) if all(v.isdigit() for v in col)]
    for i in counts:
        if any(v != "1" for v in columns[i]) and i == 0:
            raise _refuse_aggregated("its first column counts nodes, as %D prints")
    taken = set(kinds.values()) | set(counts)
    words = [
        i for i, col in enumerate(columns) if i not in taken and all(_WORD.match(v) for v in col)
    ]
    node, partition = _node_and_partition(columns, words, kinds)
    if node is not None:
        kinds["name"] = node
    if partition is not None:
        kinds["partition"] = partition
    if "gres" not in kinds or "name" not in kinds:
        missing = "GRES" if "gres" not in kinds else "node name"
        raise SnapshotFormatError(
            f"no {missing} column can be recognised in this header-less sinfo listing; print "
            f"the header (drop -h) so columns are known by name: {WORKING_COMMANDS}"
        )
    return [
        _Row(line=number, values={f: cells[i] for f, i in kinds.items()})
        for (number, _line), cells in zip(lines, split, strict=True)
    ]


def _whole_value(value: str) -> bool:
    """A value as sinfo prints one: a GRES string, a state, a name or a number."""
    return bool(_is_gres(value) or _STATE.match(value) or _WORD.match(value) or value.isdigit())


def _check_fixed_widths(lines: list[tuple[int, str]]) -> None:
    """Refuse a header-less ``-O`` listing with a value that fills its field.

    ``-O`` pads each field to its width (20 unless given, ``Gres:60``) and cuts a longer
    value there, glued to the next. Without a header, a column's width is where the next
    column starts (the starts of the row with the most values; every row's values must
    start there, or the listing is not fixed-width and nothing is checked). The last
    field's width is the padding the lines kept; where every other field is sinfo's
    default 20 wide and the last value is no value sinfo prints whole, it is 20 too (a
    run of glued fields). State flags (``mixed-``, ``draining@``, ``drained*``) are
    Slurm's own spelling, not cuts.
    """
    rows = [
        (number, line, [(m.start(), m.group()) for m in re.finditer(r"\S+", line)])
        for number, line in lines
    ]
    widest = max((cells for _n, _l, cells in rows), key=len)
    starts = [start for start, _ in widest]
    if len(starts) < 2 or not all({s for s, _ in cells} <= set(starts) for _n, _l, cells in rows):
        return
    if all(start - (s0 + len(v0)) <= 1 for (s0, v0), (start, _v) in pairwise(widest)):
        return  # one space between values: -o, not -O's padded fields
    widths = [b - a for a, b in pairwise(starts)]
    padded = [len(line) - starts[-1] for _n, line, _c in rows if line[-1:].isspace()]
    last: int | None = max(padded) if padded else None
    if set(widths) == {_DEFAULT_WIDTH}:
        last_values = [cells[-1][1] for _n, _l, cells in rows if cells[-1][0] == starts[-1]]
        if last is None or not all(_whole_value(v) for v in last_values):
            last = _DEFAULT_WIDTH
    widths.append(last or 0)
    for number, _line, cells in rows:
        for start, value in cells:
            column = starts.index(start)
            width = widths[column]
            if width and len(value) >= width:
                raise SnapshotFormatError(
                    f"sinfo line {number}: a value fills its {width}-character field "
                    f"(column {column + 1}), where sinfo -O cuts it (and glues it to the "
                    "next); give the fields widths (e.g. Gres:60) or suffixes (Gres: )"
                )


def _node_and_partition(
    columns: list[list[str]], words: list[int], kinds: dict[str, int]
) -> tuple[int | None, int | None]:
    """Which plain-word columns hold node names and partitions, by content.

    A ``*`` (the default partition) marks a partition column. Otherwise the node column
    is the one whose rows of one name agree on the node's own facts (GRES, GRES in use,
    state: a partition spans nodes that differ); failing that, the one whose names all
    carry a digit (``gpu-node1``) where the other's never do (``gpu``, ``debug``). What
    stays ambiguous (one node in three partitions looks like three nodes in one) is
    refused rather than stored swapped.
    """
    starred = [i for i in words if any(v.endswith("*") for v in columns[i])]
    plain = [i for i in words if i not in starred]
    if not plain:
        return None, min(starred) if starred else None
    if len(plain) == 1 or starred:
        node = max(plain, key=lambda i: (len(set(columns[i])), -i))
        others = [i for i in words if i != node]
        return node, min(others) if others else None
    facts = [kinds[k] for k in ("gres", "gres_used", "state") if k in kinds]
    consistent = [i for i in plain if _determines(columns[i], [columns[f] for f in facts])]
    candidates = consistent or plain
    if len(candidates) > 1:
        digits = [i for i in candidates if all(any(c.isdigit() for c in v) for v in columns[i])]
        without = [
            i for i in candidates if not any(any(c.isdigit() for c in v) for v in columns[i])
        ]
        if len(digits) == 1 and without:
            candidates = digits
    if len(candidates) > 1 and len({tuple(columns[i]) for i in candidates}) > 1:
        raise SnapshotFormatError(
            f"the columns {', '.join(str(i + 1) for i in candidates)} of this header-less "
            "sinfo listing could each be the node names or the partitions (no '*' marks "
            "the default partition, their names look alike, and each agrees with the "
            "node facts); print the header (drop -h) so columns are known by name: "
            f"{WORKING_COMMANDS}"
        )
    node = candidates[0]
    others = [i for i in words if i != node and columns[i] != columns[node]]
    return node, min(others) if others else None


def _determines(keys: list[str], facts: list[list[str]]) -> bool:
    """True when rows with the same key have the same values in every fact column."""
    seen: dict[str, tuple[str, ...]] = {}
    for row, key in enumerate(keys):
        values = tuple(column[row] for column in facts)
        if seen.setdefault(key, values) != values:
            return False
    return True


def _node(name: str, rows: list[_Row], used_known: bool) -> NodeRecord:
    first = rows[0].values
    for row in rows[1:]:
        if clean(row.values.get("gres")) != clean(first.get("gres")):
            raise SnapshotFormatError(
                f"sinfo lines {rows[0].line} and {row.line} give node {name!r} different GRES"
            )
    partitions: list[str] = []
    for row in rows:
        partition = (row.values.get("partition") or "").rstrip("*")
        if partition and partition not in partitions:
            partitions.append(partition)
    hostname = first.get("hostname")
    return build_node(
        name=name,
        hostname=hostname if first.get("name") else hostname or name,
        address=first.get("address"),
        state=first.get("state"),
        reason=first.get("reason"),
        partitions=",".join(partitions),
        features=first.get("features"),
        cpus=first.get("cpus"),
        real_memory_mb=first.get("memory"),
        gres=first.get("gres"),
        gres_used=first.get("gres_used"),
        gres_used_known=used_known,
    )


def parse_sinfo_text(text: str) -> Snapshot:
    """Parse a per-node sinfo listing into a Slurm snapshot.

    Raises SnapshotFormatError for aggregated listings (naming the commands that work),
    a listing without a node-name or GRES column, rows that do not fit the columns, values
    ``-O`` may have cut, a last row cut short (the text must end with sinfo's newline),
    an empty listing (sinfo filtered to nothing), and one node given different GRES.
    """
    numbered = [(i + 1, line) for i, line in enumerate(text.split("\n")) if line.strip()]
    if numbered and _DATE_LINE.match(numbered[0][1]):
        numbered = numbered[1:]  # sinfo -l prints the time first
    if not numbered:
        raise SnapshotFormatError("the sinfo listing is empty")
    header = _header_names(numbered[0][1])
    if header is not None:
        fields = {_HEADERS.get(name) for _, name in header}
        if "name" not in fields and "hostname" not in fields:
            raise _refuse_aggregated("no NODELIST or HOSTNAMES column names its nodes")
        if "gres" not in fields:
            raise SnapshotFormatError(
                "this sinfo listing has no GRES column, so it cannot say which nodes have "
                f"GPUs; per-node listings that can: {WORKING_COMMANDS}"
            )
        rows = _rows_with_header(numbered[1:], header, numbered[0][1])
    else:
        rows = _rows_without_header(numbered)
    if not rows:
        raise SnapshotFormatError(
            "the sinfo listing has a header but no rows (filtered with --state, -p or -n?); "
            "post an unfiltered listing: it stands for the whole cluster"
        )
    by_node: dict[str, list[_Row]] = {}
    for row in rows:
        count = row.values.get("count", "1")
        if count.isdigit() and int(count) > 1:
            raise _refuse_aggregated("its NODES column counts more than one node per row")
        name = row.values.get("name") or row.values.get("hostname") or ""
        if any(ch in name for ch in "[],") or not name:
            raise _refuse_aggregated("a row names a hostlist range, as sinfo without -N does")
        gres = row.values.get("gres", "")
        if not _is_gres(gres):
            raise SnapshotFormatError(
                f"sinfo line {row.line}: the GRES value is not a GRES string (cut at the field "
                "width?)"
            )
        by_node.setdefault(name, []).append(row)
    if not text.rstrip(" \t").endswith("\n"):
        raise SnapshotFormatError(
            "the sinfo listing does not end with the newline sinfo prints after every row: "
            "its last row may be cut short; post the whole output"
        )
    used_known = any("gres_used" in row.values for row in rows)
    nodes = [_node(name, node_rows, used_known) for name, node_rows in by_node.items()]
    return Snapshot(format=FORMAT, kind="slurm", nodes=nodes)
