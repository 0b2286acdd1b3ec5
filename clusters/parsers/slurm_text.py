"""``scontrol show node`` text: multi-line records, ``-o`` one-line records, ``-d`` detail.

The text is ``Key=Value`` pairs separated by spaces, but some values hold spaces
themselves (``OS=Linux 5.15.0 #1 SMP ...``, ``Reason=Kill task failed [root@...]``,
``Comment=...``). A key therefore starts only where a space or line start is followed by a
CamelCase word and ``=``; everything up to the next such key is the value. ``Reason``
ends at its ``[user@time]`` stamp, so a reason that contains ``Word=`` stays whole.
"""

from __future__ import annotations

import re

from clusters.parsers.records import NodeRecord, Snapshot, SnapshotFormatError
from clusters.parsers.slurm_common import build_node, clean, parse_state

FORMAT = "slurm-scontrol-text"

_RECORD_START = re.compile(r"^[ \t]*NodeName=", re.MULTILINE)
_KEY = re.compile(r"(?:(?<=\s)|^)([A-Z][A-Za-z0-9_]*)=")
_REASON_END = re.compile(r"\[[^\]\s@]+@[^\]]*\]")
# Keys whose values may hold spaces; every other value is one word (an empty one included).
_FREE_TEXT = frozenset({"OS", "Reason", "Comment", "Extra", "Features", "ActiveFeatures"})
_EMPTY_MESSAGES = ("no nodes in the system",)
# Keys that scontrol prints for every node in some Slurm version (src/api/node_info.c,
# slurm_sprint_node_table); the others (Arch, GresUsed, Version, OS, Partitions, Reason,
# Comment, ...) appear only for some nodes, so a record may lack them and be whole.
_ALWAYS_PRINTED = frozenset(
    {
        "NodeName", "CoresPerSocket", "CPUAlloc", "CPUEfctv", "CPUTot", "CPULoad",
        "AvailableFeatures", "ActiveFeatures", "Features", "Gres", "RealMemory", "AllocMem",
        "FreeMem", "Sockets", "Boards", "State", "ThreadsPerCore", "TmpDisk", "Weight",
        "Owner", "MCS_label", "BootTime", "SlurmdStartTime", "LastBusyTime",
        "ResumeAfterTime", "CfgTRES", "AllocTRES", "CapWatts", "CurrentWatts", "AveWatts",
        "ExtSensorsJoules", "ExtSensorsWatts", "ExtSensorsTemp",
    }
)  # fmt: skip
# How a record closes, by the layout of its version (src/api/node_info.c,
# slurm_sprint_node_table). Every version opens a record with CoresPerSocket and prints a
# power line for every node: `CurrentWatts= AveWatts=` (`LowestJoules= ConsumedJoules=`
# before 17.11). Versions up to 25.05 print `CapWatts=` before it and the external sensors
# line (`ExtSensorsJoules= ExtSensorsWatts= ExtSensorsTemp=`) after it; newer ones print
# neither. What may follow is optional: Reason (and its continuation lines), Comment,
# Extra, InstanceId/InstanceType, ReservationName.
_FIRST_LINE_KEY = "CoresPerSocket"
_POWER_LINE_KEY = "CurrentWatts"
_POWER_LINE_ENDS = ("AveWatts", "ConsumedJoules")
_EXT_SENSORS_KEYS = ("ExtSensorsJoules", "ExtSensorsWatts", "ExtSensorsTemp")
_EXT_SENSORS_SIGNS = frozenset({"CapWatts", "ExtSensorsJoules", "ExtSensorsWatts"})
_LAST_PRINTED = frozenset({*_POWER_LINE_ENDS, "ExtSensorsTemp"})
_TRAILERS = frozenset(
    {"Reason", "Comment", "Extra", "InstanceId", "InstanceType", "ReservationName"}
)
# A closing value as scontrol prints it (a number, n/a or n/s): "ExtSensorsTemp=n" is cut.
_CLOSING_VALUE = re.compile(r"^(?:\d+|n/[as])$")
# scontrol indents a reason's further lines by seven spaces after its line break.
_REASON_CONTINUATION = re.compile(r"^(?:\n {10}| {8})\S")
_CONFIG_LINE = re.compile(
    r"^[ \t]*(PartitionName|SlurmctldHost|ControlMachine|ClusterName|GresTypes|NodeSet)=",
    re.MULTILINE | re.IGNORECASE,
)


def looks_like(text: str) -> bool:
    """True when the text starts like ``scontrol show node`` output."""
    stripped = text.lstrip()
    return stripped.startswith("NodeName=") or stripped.lower().startswith(_EMPTY_MESSAGES)


def parse_fields(record: str) -> dict[str, str]:
    """``Key=Value`` pairs of one node record, values with spaces kept whole."""
    return {key: value for key, value, _end in _field_spans(record)}


def _field_spans(record: str) -> list[tuple[str, str, int]]:
    """(key, value, where the value ends in `record`) of each field, in order; a key
    printed twice keeps its last value in `parse_fields`."""
    spans: list[tuple[str, str, int]] = []
    keys = list(_KEY.finditer(record))
    skip_before = 0
    for i, match in enumerate(keys):
        if match.start() < skip_before:
            continue  # a Key= look-alike inside a Reason that ended at its stamp
        key = match.group(1)
        value_start = match.end()
        if key == "Reason":
            stamp = _REASON_END.search(record, value_start)
            line_end = record.find("\n", value_start)
            # The stamp closes the reason when it comes before the end of its line
            # (multi-line) or anywhere in the rest of the record (-o, one line).
            if stamp and (line_end == -1 or stamp.start() < line_end):
                spans.append((key, record[value_start : stamp.end()].strip(), stamp.end()))
                skip_before = stamp.end()
                continue
        end = keys[i + 1].start() if i + 1 < len(keys) else len(record)
        raw = record[value_start:end]
        value = raw.strip()
        value_end = value_start + len(raw.rstrip())
        if key not in _FREE_TEXT and "\n" in value:
            # A one-word value: text on the next line that did not look like a key is
            # noise; only free-text keys (OS, Reason, Comment, ...) span words.
            value = value.split("\n", 1)[0].strip()
            value_end = record.index("\n", value_start)
        spans.append((key, value, value_end))
    return spans


def _cut_short(text: str, record: str, fields: dict[str, str], others: list[set[str]]) -> str:
    """Why the last record looks cut short, or "" when it looks whole.

    A capture cut mid-record must not pass as a smaller cluster (the missing nodes would be
    marked gone, or the last node stored without what it lost). A record is whole when it
    has the fields scontrol prints last for its version (the power line; the external
    sensors line where the version prints ``CapWatts``), with or without the blank line
    scontrol prints after it, which captures from a terminal or a ticket often lose.

    The last record is cut when the text ends in a line that is neither a record nor a
    continuation; when it lacks a key that scontrol always prints and every other record
    has; when it opens like scontrol (CoresPerSocket) but stops before its last fields;
    when, without the blank line, a drained, failed or down node has no Reason (scontrol
    prints one after the last fields, so it may be the line that was lost); when the text
    stops inside a closing value (``ExtSensorsTemp=n``) without a newline; when its last
    value runs into a fragment (``AveWatts=0 Ext``, or a line with no ``Key=``); or when it
    ends inside the ``[user@time]`` of its Reason. A cut inside the last digits of a
    closing number (``AveWatts=12`` of ``123``) cannot be told and changes nothing kept.
    """
    body = text.rstrip()
    last_line = body[body.rfind("\n") + 1 :]
    line_ends_after = text[len(body) :].count("\n")  # 1: a newline; 2: a blank line too
    if not last_line.startswith(("NodeName=", " ", "\t")):
        return "the text ends inside the next record"
    expected = set.intersection(*others) & _ALWAYS_PRINTED if others else set()
    missing = sorted(expected - fields.keys())
    if missing:
        shown = ", ".join(missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        return f"it lacks {shown}{more}, which the other records have"
    spans = _field_spans(record)
    if _FIRST_LINE_KEY in fields:
        cut = _cut_before_the_end(fields, others)
        if cut:
            return cut
        ends_as_scontrol = line_ends_after >= (1 if "\n" not in record else 2)
        if not ends_as_scontrol:
            base, flags, _raw = parse_state(fields.get("State"))
            if "Reason" not in fields and (base == "down" or {"drain", "fail"} & set(flags)):
                return (
                    f"it ends before its Reason= line, which scontrol prints after the last "
                    f"fields of a {fields.get('State')} node (and the text lacks the blank "
                    "line that would say the record is whole)"
                )
        closing = max(i for i, (k, _v, _e) in enumerate(spans) if k in _LAST_PRINTED)
        after = [k for k, _v, _e in spans[closing + 1 :]]
        if any(k not in _TRAILERS for k in after):
            # only Reason, Comment, ... follow the last fields: a Key= look-alike in a
            # Reason whose [user@time] was cut off, or the end of another record
            return "it ends inside the text after its last fields (a Reason cut short?)"
        if line_ends_after == 0:
            key, value, _end = spans[-1]
            if key in _LAST_PRINTED and not _CLOSING_VALUE.match(value):
                return f"it ends inside its {key}= value, with no newline after it"
            if key == "Reason" and not _REASON_END.search(value):
                return "it ends inside its Reason (before its [user@time], with no newline)"
    if spans:
        key, value, end = spans[-1]
        rest = record[end:]
        if key in _FREE_TEXT and "\n" in value:
            rest = value[value.index("\n") :]
        if rest.strip() and not (key == "Reason" and _REASON_CONTINUATION.match(rest)):
            return f"it ends inside a line after {key}= that holds no Key=Value field"
        if key not in _FREE_TEXT and any(ch.isspace() for ch in value):
            return f"it ends inside the field after {key}="
        if key == "Reason" and value.rfind("[") > value.rfind("]"):
            return "it ends inside its Reason"
    return ""


def _cut_before_the_end(fields: dict[str, str], others: list[set[str]]) -> str:
    """Why a record that opens like scontrol stops before the fields its version prints
    last, or "" when it has them."""
    if _POWER_LINE_KEY not in fields or not any(k in fields for k in _POWER_LINE_ENDS):
        return (
            f"it ends before its power line ({_POWER_LINE_KEY}= {_POWER_LINE_ENDS[0]}=), "
            "which scontrol prints for every node"
        )
    ext_sensors = bool(_EXT_SENSORS_SIGNS & fields.keys()) or any(
        "ExtSensorsTemp" in keys for keys in others
    )
    missing = [k for k in _EXT_SENSORS_KEYS if k not in fields]
    if ext_sensors and missing:
        return (
            f"it ends before {', '.join(k + '=' for k in missing)}, which the Slurm versions "
            "that print CapWatts= print last for every node"
        )
    return ""


def _node(fields: dict[str, str]) -> NodeRecord:
    gres_used_known = "GresUsed" in fields
    return build_node(
        name=fields["NodeName"],
        hostname=fields.get("NodeHostName"),
        address=fields.get("NodeAddr"),
        state=fields.get("State"),
        reason=fields.get("Reason"),
        partitions=fields.get("Partitions"),
        features=fields.get("AvailableFeatures", fields.get("Features")),
        cpus=fields.get("CPUTot"),
        cpus_effective=fields.get("CPUEfctv"),
        real_memory_mb=fields.get("RealMemory"),
        gres=fields.get("Gres"),
        gres_used=fields.get("GresUsed"),
        gres_used_known=gres_used_known,
        alloc_tres=fields.get("AllocTRES"),
        cfg_tres=fields.get("CfgTRES"),
        os_string=fields.get("OS"),
        slurm_version=fields.get("Version"),
        architecture=fields.get("Arch"),
    )


def parse_scontrol_text(text: str) -> Snapshot:
    """Parse ``scontrol show node`` (any of its layouts) into a Slurm snapshot.

    Raises SnapshotFormatError when a record lacks a node name, the text is not scontrol
    output, or its last record is cut short (see ``_cut_short``). ``No nodes in the
    system`` is an empty snapshot, as Slurm means it. Without ``GresUsed`` (no ``-d``),
    GPUs in use come from ``AllocTRES`` where the cluster accounts them.
    """
    if text.strip().lower().startswith(_EMPTY_MESSAGES):
        return Snapshot(format=FORMAT, kind="slurm", nodes=[])
    starts = [m.start() for m in _RECORD_START.finditer(text)]
    if not starts or text[: starts[0]].strip():
        raise SnapshotFormatError("text does not start with a scontrol NodeName= record")
    if _CONFIG_LINE.search(text):
        raise SnapshotFormatError(
            "this looks like slurm.conf, not scontrol show node output (it has "
            "PartitionName=, SlurmctldHost= or similar configuration lines)"
        )
    nodes: list[NodeRecord] = []
    seen: set[str] = set()
    versions: set[str] = set()
    key_sets: list[set[str]] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        record = text[start:end].strip()
        fields = parse_fields(record)
        name = clean(fields.get("NodeName"))
        if name and "[" in name:
            raise SnapshotFormatError(
                f"record {i + 1} is not scontrol show node output (a hostlist name as in "
                "slurm.conf)"
            )
        if i + 1 == len(starts):
            cut = _cut_short(text, record, fields, key_sets)
            if cut:
                shown = (name or "?").split()[0][:64]
                raise SnapshotFormatError(
                    f"the last scontrol record (record {i + 1}, node {shown!r}) is cut short: "
                    f"{cut}. A capture cut short would mark the nodes after it gone; "
                    "post the whole output"
                )
        key_sets.append(set(fields))
        if not name:
            raise SnapshotFormatError(f"scontrol record {i + 1} has an empty NodeName")
        if "State" not in fields:
            raise SnapshotFormatError(f"record {i + 1} is not scontrol show node output (no State)")
        if name in seen:
            raise SnapshotFormatError(f"scontrol output names node {name!r} twice")
        seen.add(name)
        fields["NodeName"] = name
        node = _node(fields)
        if node.slurm_version:
            versions.add(node.slurm_version)
        nodes.append(node)
    return Snapshot(
        format=FORMAT,
        kind="slurm",
        nodes=nodes,
        source_version=versions.pop() if len(versions) == 1 else None,
    )
