"""Rules over a whole cluster: NVIDIA driver or CUDA versions that differ between its nodes."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping

from findings.choices import FindingType, Severity
from findings.facts import FindingFact

from .types import Fleet
from .words import plural


def driver_skew(fleet: Fleet) -> list[FindingFact]:
    """More than one driver (or CUDA) version on a cluster's GPU servers: jobs may behave
    differently by node. Counted per bound node, so a server in two clusters counts in both."""
    drivers: dict[int, Counter[str]] = defaultdict(Counter)
    cudas: dict[int, Counter[str]] = defaultdict(Counter)
    for node, server in fleet.bound:
        if server.gpus:
            if server.driver_version:
                drivers[node.cluster_id][server.driver_version] += 1
            if server.cuda_version:
                cudas[node.cluster_id][server.cuda_version] += 1
    return skew_findings(drivers, cudas, fleet.clusters)


def skew_findings(
    drivers: Mapping[int, Counter[str]],
    cudas: Mapping[int, Counter[str]],
    clusters: Mapping[int, str],
) -> list[FindingFact]:
    """The skew findings from each cluster's versions, counted in bound-node order (versions
    of equal count are listed in the order their first node came)."""
    found = []
    for label, table in (("driver", drivers), ("CUDA", cudas)):
        for cluster_id, versions in table.items():
            if len(versions) < 2:
                continue
            listed = ", ".join(f"{v} on {plural(n, 'server')}" for v, n in versions.most_common())
            found.append(
                FindingFact(
                    FindingType.DRIVER_SKEW,
                    Severity.WARNING,
                    f"cluster:{cluster_id}:{label.lower()}",
                    f"{clusters[cluster_id]}: {len(versions)} NVIDIA {label} versions in "
                    f"one cluster ({listed}); jobs may behave differently by node",
                    cluster_id=cluster_id,
                    details={"versions": dict(versions)},
                )
            )
    return found
