"""Rules on a bound node's state against its server's: a ready node whose agent went quiet, a
schedulable node with unhealthy GPUs, an unavailable node whose hardware looks healthy."""

from __future__ import annotations

from findings.choices import FindingType, Severity
from findings.facts import FindingFact
from inventory.health import GpuProblem

from .types import Fleet
from .words import plural

CRITICAL_PROBLEMS = frozenset({GpuProblem.LOST, GpuProblem.NVML_ERROR, GpuProblem.ROW_REMAP_FAILED})
"""The GPU problems that make an unhealthy-GPU finding critical."""


def stale_agent(fleet: Fleet) -> list[FindingFact]:
    """A ready, schedulable node whose server's agent has not reported for a while: its
    hardware facts may be old."""
    found = []
    for node, server in fleet.bound:
        if not (node.schedulable and node.ready and fleet.is_stale(server)):
            continue
        found.append(
            FindingFact(
                FindingType.STALE_AGENT,
                Severity.WARNING,
                node.subject,
                f"{node.label}: the node is ready and schedulable but the agent on "
                f"{server.hostname} last reported {server.last_seen:%Y-%m-%d %H:%M} UTC; "
                "its hardware facts may be old",
                server_id=server.id,
                node_id=node.id,
                cluster_id=node.cluster_id,
            )
        )
    return found


def unhealthy_gpu(fleet: Fleet) -> list[FindingFact]:
    """A schedulable node on a server with unhealthy GPUs (lost, failing NVML, failed row
    remap: critical; pending a reset, uncorrected ECC: warning)."""
    found = []
    for node, server in fleet.bound:
        if not node.schedulable or not server.unhealthy:
            continue
        problems = server.health_problems()
        if not problems:
            continue
        critical = CRITICAL_PROBLEMS & set(server.problem_counts())
        found.append(
            FindingFact(
                FindingType.UNHEALTHY_GPU,
                Severity.CRITICAL if critical else Severity.WARNING,
                node.subject,
                f"{node.label}: schedulable, but {server.hostname} has {'; '.join(problems)}; "
                "drain it before jobs land on a bad GPU",
                details={"problems": problems, "gpus": sorted(server.unhealthy)},
                server_id=server.id,
                node_id=node.id,
                cluster_id=node.cluster_id,
            )
        )
    return found


def node_unavailable(fleet: Fleet) -> list[FindingFact]:
    """A node out of service (down, drained, cordoned) while its server reports recently and
    healthy: capacity idle, worth a look."""
    found = []
    for node, server in fleet.bound:
        if node.ready and node.schedulable:
            continue
        if (server.unhealthy and server.health_problems()) or not fleet.is_fresh(server):
            continue
        why = node.reason or ", ".join(node.state_flags) or node.state
        found.append(
            FindingFact(
                FindingType.NODE_UNAVAILABLE,
                Severity.INFO,
                node.subject,
                f"{node.label}: {node.raw_state or node.state} in {node.cluster} ({why}), "
                f"while the hardware of {server.hostname} looks healthy: "
                f"{plural(server.gpus, 'GPU')} idle",
                server_id=server.id,
                node_id=node.id,
                cluster_id=node.cluster_id,
            )
        )
    return found
