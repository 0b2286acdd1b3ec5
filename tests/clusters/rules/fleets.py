"""Hand-built facts for the finding rules: a server, a node, a fleet, with the defaults of a
healthy 8-GPU H100 server bound to a ready node. No database."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from clusters.parsers.records import GresRecord
from clusters.rules.types import Fleet, HardwareProfileFacts, NodeFacts, ServerFacts
from inventory.health import gpu_health

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
STALE_AFTER = timedelta(minutes=5)
OFFLINE_AFTER = timedelta(hours=1)
H100 = "NVIDIA H100 80GB HBM3"


def server(id: int = 1, hostname: str | None = None, **facts: Any) -> ServerFacts:
    """An 8 x H100 server that reported a minute ago."""
    facts.setdefault("gpus", 8)
    facts.setdefault("names", frozenset({H100}))
    facts.setdefault("last_seen", NOW - timedelta(minutes=1))
    facts.setdefault("driver_version", "550.54.15")
    facts.setdefault("cuda_version", "12.4")
    if "mig_profiles" in facts:
        facts["mig_profiles"] = Counter(facts["mig_profiles"])
    return ServerFacts(id=id, hostname=hostname or f"dgx-{id:02d}", **facts)


def node(id: int = 1, server_id: int | None = 1, **facts: Any) -> NodeFacts:
    """A ready, schedulable Kubernetes node advertising 8 `nvidia.com/gpu`."""
    facts.setdefault("cluster_id", 1)
    facts.setdefault("cluster", "prod")
    facts.setdefault("kind", "kubernetes")
    facts.setdefault("name", f"worker-{id}")
    facts.setdefault("state", "ready")
    facts.setdefault("gpu_capacity", 8)
    facts.setdefault("gpu_allocatable", facts["gpu_capacity"])
    return NodeFacts(id=id, server_id=server_id, **facts)


def slurm_node(id: int = 1, server_id: int | None = 1, gres: str = "gpu:h100:8", **facts):
    """A Slurm node in cluster `hpc` with the given `name:type:count` GRES (comma-separated;
    a type with `g.` in it is a MIG profile)."""
    records = []
    for entry in filter(None, gres.split(",")):
        name, kind, count = entry.split(":")
        mig = kind if "g." in kind else None
        records.append(GresRecord(name=name, type=kind, count=int(count), mig_profile=mig))
    facts.setdefault("cluster_id", 2)
    facts.setdefault("cluster", "hpc")
    facts.setdefault("state", "idle")
    facts.setdefault("name", f"gpu{id:03d}")
    facts.setdefault("gpu_capacity", sum(r.count for r in records if r.name == "gpu"))
    return node(id, server_id, kind="slurm", gres=tuple(records), **facts)


def profile(name: str = "dgx-h100", count: int = 8, model: str = "H100") -> HardwareProfileFacts:
    return HardwareProfileFacts(id=1, name=name, expected_gpu_count=count, expected_gpu_model=model)


def unhealthy(**gpus: dict[str, Any]) -> dict:
    """GPU health by UUID from HEALTH_FIELDS: `unhealthy(a={"status": "lost"})`."""
    return {uuid: gpu_health(fields) for uuid, fields in gpus.items()}


def fleet(
    servers=(),
    nodes=(),
    clusters: dict[int, str] | None = None,
    **facts: Any,
) -> Fleet:
    """A fleet at NOW; clusters default to those the nodes name."""
    if clusters is None:
        clusters = {n.cluster_id: n.cluster for n in nodes} or {1: "prod"}
    return Fleet(
        nodes=tuple(nodes),
        servers={s.id: s for s in servers},
        now=NOW,
        stale_before=NOW - STALE_AFTER,
        offline_before=NOW - OFFLINE_AFTER,
        clusters=clusters,
        **facts,
    )


def one(findings):
    """The single finding of a rule's answer."""
    assert len(findings) == 1, findings
    return findings[0]
