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
from clusters.parsers.slurm_common import build_node, clean

FORMAT = "slurm-scontrol-text"

_RECORD_START = re.compile(r"^[ \t]*NodeName=", re.MULTILINE)
_KEY = re.compile(r"(?:(?<=\s)|^)([A-Z][A-Za-z0-9_]*)=")
_REASON_END = re.compile(r"\[[^\]\s@]+@[^\]]*\]")
# Keys whose values may hold spaces; every other value is one word (an empty one included).
_FREE_TEXT = frozenset({"OS", "Reason", "Comment", "Extra", "Features", "ActiveFeatures"})
_EMPTY_MESSAGES = ("no nodes in the system",)
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
    fields: dict[str, str] = {}
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
                fields[key] = record[value_start : stamp.end()].strip()
                skip_before = stamp.end()
                continue
        end = keys[i + 1].start() if i + 1 < len(keys) else len(record)
        value = record[value_start:end].strip()
        if key not in _FREE_TEXT and "\n" in value:
            # A one-word value: text on the next line that did not look like a key is
            # noise; only free-text keys (OS, Reason, Comment, ...) span words.
            value = value.split("\n", 1)[0].strip()
        fields[key] = value
    return fields


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
        real_memory_mb=fields.get("RealMemory"),
        gres=fields.get("Gres"),
        gres_used=fields.get("GresUsed"),
        gres_used_known=gres_used_known,
        os_string=fields.get("OS"),
        slurm_version=fields.get("Version"),
        architecture=fields.get("Arch"),
    )


def parse_scontrol_text(text: str) -> Snapshot:
    """Parse ``scontrol show node`` (any of its layouts) into a Slurm snapshot.

    Raises SnapshotFormatError when a record lacks a node name or the text is not
    scontrol output. ``No nodes in the system`` is an empty snapshot, as Slurm means it.
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
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        fields = parse_fields(text[start:end].strip())
        name = clean(fields.get("NodeName"))
        if not name:
            raise SnapshotFormatError(f"scontrol record {i + 1} has an empty NodeName")
        if "[" in name or "State" not in fields:
            raise SnapshotFormatError(
                f"record {i + 1} is not scontrol show node output (no State, or a hostlist "
                "name as in slurm.conf)"
            )
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
