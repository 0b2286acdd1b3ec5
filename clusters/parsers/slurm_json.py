"""Slurm's JSON node outputs: slurmrestd, ``scontrol show node --json``, ``sinfo --json``.

Two layouts exist:

- a ``nodes`` list of node objects: slurmrestd ``GET /slurm/v0.0.3x-4x/nodes`` (and
  ``/node/{name}``), ``scontrol show node --json`` (23.02+), and ``sinfo --json`` of
  22.05 (which printed the openapi/v0.0.38 node list). v0.0.38 spells ``state`` as a
  lower-case string beside ``state_flags`` and numbers as plain values; v0.0.39+ spells
  ``state`` as a list (``["IDLE", "DRAIN"]``), renames ``slurmd_version`` to ``version``,
  turns ``features`` into lists and many numbers into ``{set, infinite, number}`` objects;
- a ``sinfo`` list (``sinfo --json`` of 23.02+, data_parser v0.0.39+), one entry per
  group of nodes that share partition and state, the node names in ``nodes.nodes``.

The shapes of v0.0.39-v0.0.44 follow Slurm's published OpenAPI descriptions (the
``v0.0.4x_node`` and ``v0.0.4x_openapi_nodes_resp`` schemas).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from clusters.parsers.records import NodeRecord, Snapshot, SnapshotFormatError
from clusters.parsers.shape import child, field
from clusters.parsers.slurm_common import build_node, clean, expand_hostlist, to_int

NODES_FORMAT = "slurm-nodes-json"
SINFO_FORMAT = "slurm-sinfo-json"

_VERSION = re.compile(r"v\d+\.\d+\.\d+")


def looks_like(document: dict[str, Any]) -> bool:
    """True for a JSON object in either Slurm layout."""
    return isinstance(document.get("nodes"), list) or isinstance(document.get("sinfo"), list)


def _meta(document: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(api_version, release, cluster) from ``meta``, whatever its vintage."""
    meta = document.get("meta")
    if not isinstance(meta, dict):
        return None, None, None
    api_version = None
    for plugin_key in ("plugin", "plugins"):
        plugin = meta.get(plugin_key)
        if isinstance(plugin, dict):
            for key in ("data_parser", "type"):
                match = _VERSION.search(str(plugin.get(key) or ""))
                if match:
                    api_version = match.group(0)
                    break
        if api_version:
            break
    slurm = meta.get("slurm") or meta.get("Slurm")
    release = cluster = None
    if isinstance(slurm, dict):
        release = clean(slurm.get("release"))
        cluster = clean(slurm.get("cluster"))
    return api_version, release, cluster


def _errors(document: dict[str, Any]) -> list[str]:
    messages = []
    for error in field(document, "errors", "", list) or []:
        if isinstance(error, dict):
            text = error.get("description") or error.get("error") or ""
            number = error.get("error_number", error.get("errno"))
            messages.append(f"{text} ({number})" if number is not None else str(text))
        else:
            messages.append(str(error))
    return [m[:200] for m in messages if m]


def _node_from_object(node: dict[str, Any], path: str) -> NodeRecord:
    name = clean(node.get("name"))
    if not name:
        raise SnapshotFormatError("a Slurm node object has no name")
    return build_node(
        name=name,
        hostname=node.get("hostname"),
        address=node.get("address"),
        state=node.get("state"),
        state_flags=[str(f) for f in field(node, "state_flags", path, list) or []],
        reason=node.get("reason"),
        reason_set_by=node.get("reason_set_by_user"),
        partitions=node.get("partitions"),
        features=node.get("features"),
        cpus=node.get("cpus"),
        cpus_effective=node.get("effective_cpus"),
        real_memory_mb=node.get("real_memory"),
        gres=node.get("gres"),
        gres_used=node.get("gres_used"),
        gres_used_known="gres_used" in node,
        os_string=node.get("operating_system"),
        slurm_version=node.get("version", node.get("slurmd_version")),
        architecture=node.get("architecture"),
    )


def _sub(entry: dict[str, Any], key: str) -> dict[str, Any]:
    value = entry.get(key)
    return value if isinstance(value, dict) else {}


def _sinfo_nodes(entry: dict[str, Any], path: str) -> list[NodeRecord]:
    """The nodes of one ``sinfo`` group; per-node figures are the group's maxima.
    The lists are typed reads: a number where a list belongs is a 400 naming its path."""
    group, where = _sub(entry, "nodes"), child(path, "nodes")
    names: list[str] = []
    for item in field(group, "nodes", where, list) or []:
        names.extend(expand_hostlist(str(item)))
    hostnames = [str(h) for h in field(group, "hostnames", where, list) or []]
    addresses = [str(a) for a in field(group, "addresses", where, list) or []]
    cpus, memory, gres = _sub(entry, "cpus"), _sub(entry, "memory"), _sub(entry, "gres")
    reason, partition = _sub(entry, "reason"), _sub(entry, "partition")
    features = _sub(entry, "features")
    records = []
    for i, name in enumerate(names):
        records.append(
            build_node(
                name=name,
                hostname=hostnames[i] if len(hostnames) == len(names) else None,
                address=addresses[i] if len(addresses) == len(names) else None,
                state=_sub(entry, "node").get("state"),
                reason=reason.get("description"),
                reason_set_by=reason.get("user"),
                partitions=[partition["name"]] if partition.get("name") else [],
                features=features.get("total"),
                cpus=cpus.get("maximum", cpus.get("total")),
                real_memory_mb=memory.get("maximum"),
                gres=gres.get("total"),
                gres_used=gres.get("used"),
                gres_used_known="used" in gres,
            )
        )
    return records


def _merge_partitions(nodes: list[NodeRecord]) -> list[NodeRecord]:
    """One record per node name; a node listed under several partitions keeps them all."""
    merged: dict[str, NodeRecord] = {}
    for node in nodes:
        seen = merged.get(node.name)
        if seen is None:
            merged[node.name] = node
            continue
        partitions = seen.partitions + [p for p in node.partitions if p not in seen.partitions]
        merged[node.name] = dataclasses.replace(seen, partitions=partitions)
    return list(merged.values())


def parse_slurm_json(document: dict[str, Any]) -> Snapshot:
    """Parse a decoded Slurm JSON document (either layout) into a snapshot.

    A response that carries errors and no nodes (an expired token, a refused request) is
    a SnapshotFormatError naming Slurm's own error text, never an empty node set: an empty
    set would mark every node of the cluster gone.
    """
    api_version, release, cluster = _meta(document)
    errors = _errors(document)
    if isinstance(document.get("sinfo"), list):
        entries = document["sinfo"]
        if errors and not entries:
            raise SnapshotFormatError(f"sinfo reports errors: {'; '.join(errors)}")
        nodes: list[NodeRecord] = []
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise SnapshotFormatError("a sinfo entry is not an object")
            nodes.extend(_sinfo_nodes(entry, f"sinfo[{index}]"))
            cluster = cluster or clean(entry.get("cluster"))
        return Snapshot(
            format=SINFO_FORMAT,
            kind="slurm",
            nodes=_merge_partitions(nodes),
            cluster_name=cluster,
            source_version=release,
            api_version=api_version,
        )
    items = document.get("nodes")
    if not isinstance(items, list):
        raise SnapshotFormatError("the JSON has neither a Slurm 'nodes' nor a 'sinfo' list")
    if errors and not items:
        raise SnapshotFormatError(f"the Slurm response reports errors: {'; '.join(errors)}")
    nodes = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise SnapshotFormatError("a Slurm node entry is not an object")
        node = _node_from_object(item, f"nodes[{index}]")
        if node.name in seen:
            raise SnapshotFormatError(f"the Slurm response names node {node.name!r} twice")
        seen.add(node.name)
        nodes.append(node)
        cluster = cluster or clean(item.get("cluster_name"))
    return Snapshot(
        format=NODES_FORMAT,
        kind="slurm",
        nodes=nodes,
        cluster_name=cluster,
        source_version=release,
        api_version=api_version,
    )


def last_update(document: dict[str, Any]) -> int | None:
    """The controller's ``last_update`` time (epoch seconds) where the response has one."""
    return to_int(document.get("last_update"))
