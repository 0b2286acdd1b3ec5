"""Format detection: one entry point for every scheduler snapshot a person may post.

``parse_snapshot`` looks at the text's shape (JSON object keys, ``NodeName=``, ``Name:``,
YAML ``apiVersion:``, a sinfo header or GRES column), hands it to the one parser for that
format, and turns every failure into a SnapshotFormatError that names the accepted formats,
so the API can answer 400 and leave the cluster's previous node set untouched.
"""

from __future__ import annotations

from typing import Any

from agent.sources.text import TextDecodeError, decode_text
from clusters.parsers import (
    kubernetes,
    kubernetes_describe,
    slurm_json,
    slurm_sinfo,
    slurm_text,
)
from clusters.parsers.records import Snapshot, SnapshotFormatError
from core.safe_input import InputRejected, json_loads, yaml_load


def decode_snapshot(raw: str | bytes) -> str:
    """The snapshot as text: the one decoding step the agent's inputs take too (a BOM,
    CRLF and ANSI escapes dropped; UTF-16, other non-UTF-8 bytes and NULs refused)."""
    try:
        return decode_text(raw)
    except TextDecodeError as exc:
        raise SnapshotFormatError(f"the snapshot is not text this project reads: {exc}") from None


def _load_json(text: str) -> Any:
    try:
        return json_loads(text)
    except InputRejected as exc:  # not RFC 8259, too deep, NUL or lone surrogate
        raise SnapshotFormatError(_where(exc)) from None


def _load_yaml(text: str) -> Any:
    try:
        return yaml_load(text)
    except InputRejected as exc:  # aliases, too deep, too large, NUL or lone surrogate
        raise SnapshotFormatError(_where(exc)) from None


def _where(exc: InputRejected) -> str:
    return str(exc) if exc.path == "body" else f"{exc.path}: {exc}"


def _looks_like_labels(document: dict[str, Any]) -> bool:
    return bool(document) and all(
        isinstance(v, str) and ("/" in k or "." in k) for k, v in document.items()
    )


def _from_document(document: Any) -> Snapshot:
    if not isinstance(document, dict):
        raise SnapshotFormatError(
            f"the document is a JSON {type(document).__name__}, not an object"
        )
    if kubernetes.looks_like(document):
        return kubernetes.parse_kubernetes(document)
    if slurm_json.looks_like(document):
        return slurm_json.parse_slurm_json(document)
    kind = document.get("kind")
    if kind in ("Pod", "PodList"):
        raise SnapshotFormatError("a pod list is not a node snapshot")
    if kind:
        raise SnapshotFormatError(f"a Kubernetes object of kind {kind!r} is not a node snapshot")
    if _looks_like_labels(document):
        raise SnapshotFormatError(
            "this is a map of node labels only (metadata.labels), not a whole Node"
        )
    keys = ", ".join(sorted(str(k) for k in document)[:8]) or "none"
    raise SnapshotFormatError(f"a JSON object of unknown shape (top-level keys: {keys})")


def parse_document(document: Any) -> Snapshot:
    """Parse an already-decoded JSON document (what the pull clients return).

    Same rules and errors as ``parse_snapshot``, without the text decoding step.
    """
    try:
        return _from_document(document)
    except SnapshotFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise SnapshotFormatError(f"the input is malformed ({type(exc).__name__})") from None


def parse_snapshot(raw: str | bytes) -> Snapshot:
    """Detect the format of a scheduler snapshot and parse it.

    Accepts exactly what the tools print (see ``records.ACCEPTED_FORMATS``). Raises
    SnapshotFormatError, whose message names the accepted formats, for anything else and
    for broken input; never another exception type for bad input.
    """
    text = decode_snapshot(raw)
    stripped = text.strip()
    if not stripped:
        raise SnapshotFormatError("the snapshot is empty")
    shape = _shape(stripped)
    try:
        if shape == "json":
            return _from_document(_load_json(stripped))
        if shape == "scontrol":
            return slurm_text.parse_scontrol_text(text)  # its end tells a cut capture
        if shape == "describe":
            return kubernetes_describe.parse_describe(stripped)
        if shape == "yaml":
            return _from_document(_load_yaml(stripped))
        return slurm_sinfo.parse_sinfo_text(text)  # its end tells a cut capture
    except SnapshotFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # A known shape with unexpected values inside: still the caller's input at fault.
        raise SnapshotFormatError(f"the input is malformed ({type(exc).__name__})") from None


UNRECOGNISED = (
    "unrecognised snapshot format: not JSON, YAML, scontrol show node text, a per-node "
    "sinfo listing or kubectl describe node text"
)


def _shape(stripped: str) -> str:
    """Which parser a stripped, non-empty text is for."""
    if stripped[0] in "{[":
        return "json"
    if slurm_text.looks_like(stripped):
        return "scontrol"
    if kubernetes_describe.looks_like(stripped):
        return "describe"
    if stripped.startswith(("apiVersion:", "kind:", "---")):
        return "yaml"
    if slurm_sinfo.looks_like(stripped):
        return "sinfo"
    raise SnapshotFormatError(UNRECOGNISED)
