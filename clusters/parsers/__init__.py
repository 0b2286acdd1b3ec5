"""Pure parsers of scheduler outputs: text in, plain records out (no Django, no I/O).

``parse_snapshot`` detects the format; the format modules can also be called directly.
"""

from clusters.parsers.detect import decode_snapshot, parse_document, parse_snapshot
from clusters.parsers.kubernetes import gpu_used_by_node, parse_pods
from clusters.parsers.records import (
    ACCEPTED_FORMATS,
    GresRecord,
    NodeRecord,
    PodRecord,
    Snapshot,
    SnapshotFormatError,
)
from clusters.parsers.slurm_common import expand_hostlist, parse_gres

__all__ = [
    "ACCEPTED_FORMATS",
    "GresRecord",
    "NodeRecord",
    "PodRecord",
    "Snapshot",
    "SnapshotFormatError",
    "decode_snapshot",
    "expand_hostlist",
    "gpu_used_by_node",
    "parse_document",
    "parse_gres",
    "parse_pods",
    "parse_snapshot",
]
