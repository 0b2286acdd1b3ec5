"""``kubectl describe node`` text, read into the same NodeRecord as a Node object.

Why accept a human-readable format: it is how node state is shared in tickets and in
NVIDIA's own troubleshooting guides (the "advertises 7 of 8 GPUs" case), and it carries
the same facts as the Node object: labels, taints, unschedulable, conditions, addresses,
capacity, allocatable, system info, plus the GPUs that pods request ("Allocated
resources"), which the Node object lacks. The text is turned into a Node-shaped dict and
read by ``kubernetes.parse_node``, so both paths agree. Sections that are missing or elided
(``......``) are simply absent: a describe without a Ready condition is state "unknown".
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from clusters.parsers.kubernetes import GPU_RESOURCE, mig_counts, parse_node, quantity_int
from clusters.parsers.records import NodeRecord, Snapshot, SnapshotFormatError

FORMAT = "kubernetes-describe"

_RECORD_START = re.compile(r"^Name:[ \t]+\S", re.MULTILINE)
_TOP = re.compile(r"^([A-Z][A-Za-z -]*):(?:[ \t]+(.*))?$")
_ITEM = re.compile(r"^[ \t]+([^:]+?):[ \t]*(.*)$")
_SYSTEM_INFO = {
    "Machine ID": "machineID",
    "System UUID": "systemUUID",
    "Boot ID": "bootID",
    "Kernel Version": "kernelVersion",
    "OS Image": "osImage",
    "Operating System": "operatingSystem",
    "Architecture": "architecture",
    "Container Runtime Version": "containerRuntimeVersion",
    "Kubelet Version": "kubeletVersion",
    "Kube-Proxy Version": "kubeProxyVersion",
}
_TAINT = re.compile(r"^(?P<key>[^=:\s]+)(?:=(?P<value>[^:\s]*))?:(?P<effect>\w+)$")


def looks_like(text: str) -> bool:
    """True when the text starts like ``kubectl describe node`` output."""
    head = text.lstrip()
    return head.startswith("Name:") and bool(
        re.search(r"^(Capacity|Allocatable|System Info|Addresses):", text, re.MULTILINE)
    )


def _sections(record: str) -> dict[str, list[str]]:
    """Top-level ``Key:`` sections with their own line value and indented lines."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in record.splitlines():
        if not line.strip():
            continue
        top = _TOP.match(line) if not line[0].isspace() else None
        if top:
            current = top.group(1).strip()
            sections[current] = [top.group(2).strip()] if top.group(2) else []
        elif current is not None and line[0].isspace():
            sections[current].append(line.strip())
    return sections


def _items(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        match = _ITEM.match("  " + line)
        if match:
            out[match.group(1).strip()] = match.group(2).strip()
    return out


def _table_rows(lines: list[str]) -> list[list[str]]:
    """Rows of a describe table (after its header and dashes), split on 2+ spaces."""
    rows = []
    for line in lines:
        if set(line.replace(" ", "")) <= {"-"}:
            continue
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows[1:] if rows and rows[0][:1] in (["Type"], ["Resource"]) else rows


def _node_object(
    sections: dict[str, list[str]],
) -> tuple[dict[str, Any], int | None, dict[str, int] | None]:
    name = (sections.get("Name") or [""])[0]
    labels: dict[str, str] = {}
    for line in sections.get("Labels", []):
        if line and line != "<none>":
            key, _, value = line.partition("=")
            labels[key] = value
    taints = []
    for line in sections.get("Taints", []):
        match = _TAINT.match(line)
        if match:
            taint = {"key": match.group("key"), "effect": match.group("effect")}
            if match.group("value"):
                taint["value"] = match.group("value")
            taints.append(taint)
    conditions = []
    for row in _table_rows(sections.get("Conditions", [])):
        words = " ".join(row).split()
        if len(words) >= 2:
            # Type and Status are single words; Reason and Message close a full row.
            full = len(row) >= 6
            conditions.append(
                {
                    "type": words[0],
                    "status": words[1],
                    "reason": row[4] if full else None,
                    "message": row[5] if full else None,
                }
            )
    addresses = [
        {"type": kind, "address": value}
        for kind, value in _items(sections.get("Addresses", [])).items()
    ]
    info = {
        _SYSTEM_INFO[key]: value
        for key, value in _items(sections.get("System Info", [])).items()
        if key in _SYSTEM_INFO
    }
    unschedulable = (sections.get("Unschedulable") or ["false"])[0].lower() == "true"
    # What pods request, by resource: GPUs and MIG devices by the rules of the node list
    # and pod paths (`mig_counts`); None where the section is not there.
    requested: dict[str, int] = {}
    for row in _table_rows(sections.get("Allocated resources", [])):
        if len(row) >= 2:
            amount = quantity_int(row[1].split()[0])
            if amount is not None:
                requested[row[0]] = amount
    gpu_used = requested.get(GPU_RESOURCE)
    mig_used = mig_counts(requested) if GPU_RESOURCE in requested or mig_counts(requested) else None
    node = {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"unschedulable": unschedulable, "taints": taints},
        "status": {
            "addresses": addresses,
            "capacity": _items(sections.get("Capacity", [])),
            "allocatable": _items(sections.get("Allocatable", [])),
            "conditions": conditions,
            "nodeInfo": info,
        },
    }
    return node, gpu_used, mig_used


def parse_describe(text: str) -> Snapshot:
    """Parse one or more ``kubectl describe node`` records into a Kubernetes snapshot.

    ``gpu_used`` is the ``nvidia.com/gpu`` request total from "Allocated resources", and
    ``mig_used`` the MIG devices requested there by profile, when that section is present
    (the node list path leaves both to the pods). MIG capacity (``nvidia.com/mig-1g.10gb:
    16`` under Capacity) is read by ``kubernetes.parse_node``, as for a Node object.
    Raises SnapshotFormatError when a record has no name or none of the sections that make
    it a node description.
    """
    starts = [m.start() for m in _RECORD_START.finditer(text)]
    if not starts or text[: starts[0]].strip():
        raise SnapshotFormatError("text does not start with a kubectl describe 'Name:' line")
    nodes: list[NodeRecord] = []
    seen: set[str] = set()
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        sections = _sections(text[start:end])
        if not any(k in sections for k in ("Capacity", "Allocatable", "System Info")):
            raise SnapshotFormatError(
                "a kubectl describe record has no Capacity, Allocatable or System Info"
            )
        obj, gpu_used, mig_used = _node_object(sections)
        node = parse_node(obj)
        if gpu_used is not None or mig_used is not None:
            node = dataclasses.replace(node, gpu_used=gpu_used or 0, mig_used=mig_used or {})
        if node.name in seen:
            raise SnapshotFormatError(f"the describe output names node {node.name!r} twice")
        seen.add(node.name)
        nodes.append(node)
    return Snapshot(format=FORMAT, kind="kubernetes", nodes=nodes)
