"""Rules over a whole cluster: NVIDIA driver or CUDA versions that differ between its nodes."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from findings.choices import FindingType, Severity
from findings.facts import FindingFact

from .types import Fleet
from .words import plural

SKEW_NAMES_MOST = 5
"""How many servers a skew finding names per version (the first by hostname); the rest are
counted ("and 3 more"), so a finding about a thousand nodes stays one line."""

VersionKey = tuple[str, int, str]
"""(`driver` or `cuda`, cluster id, version)."""


def driver_skew(fleet: Fleet) -> list[FindingFact]:
    """More than one driver (or CUDA) version on a cluster's GPU servers: jobs may behave
    differently by node. Counted per bound node, so a server in two clusters counts in both;
    each version names its first SKEW_NAMES_MOST servers by hostname (then node id)."""
    drivers: dict[int, Counter[str]] = defaultdict(Counter)
    cudas: dict[int, Counter[str]] = defaultdict(Counter)
    on: dict[VersionKey, list[tuple[str, int]]] = defaultdict(list)
    for node, server in fleet.bound:
        if server.gpus:
            if server.driver_version:
                drivers[node.cluster_id][server.driver_version] += 1
                on["driver", node.cluster_id, server.driver_version].append(
                    (server.hostname, node.id)
                )
            if server.cuda_version:
                cudas[node.cluster_id][server.cuda_version] += 1
                on["cuda", node.cluster_id, server.cuda_version].append((server.hostname, node.id))
    names = {key: [h for h, _ in sorted(rows)[:SKEW_NAMES_MOST]] for key, rows in on.items()}
    return skew_findings(drivers, cudas, fleet.clusters, names)


def first_names(names: Sequence[str]) -> list[str]:
    """The hostnames a version names, once each, in the order given."""
    return list(dict.fromkeys(names))


def skew_findings(
    drivers: Mapping[int, Counter[str]],
    cudas: Mapping[int, Counter[str]],
    clusters: Mapping[int, str],
    names: Mapping[VersionKey, Sequence[str]] | None = None,
) -> list[FindingFact]:
    """The skew findings from each cluster's versions, counted in bound-node order (versions
    of equal count are listed in the order their first node came), each naming the servers
    on it that `names` gives (at most SKEW_NAMES_MOST per version, by hostname)."""
    names = names or {}
    found = []
    for label, table in (("driver", drivers), ("CUDA", cudas)):
        for cluster_id, versions in table.items():
            if len(versions) < 2:
                continue
            servers = {
                v: first_names(names.get((label.lower(), cluster_id, v), ())) for v in versions
            }
            listed = "; ".join(
                f"{v} on {plural(n, 'server')}{_named(servers[v], n)}"
                for v, n in versions.most_common()
            )
            found.append(
                FindingFact(
                    FindingType.DRIVER_SKEW,
                    Severity.WARNING,
                    f"cluster:{cluster_id}:{label.lower()}",
                    f"{clusters[cluster_id]}: {len(versions)} NVIDIA {label} versions in "
                    f"one cluster ({listed}); jobs may behave differently by node",
                    cluster_id=cluster_id,
                    details={
                        "versions": dict(versions),
                        "servers": {v: servers[v] for v, _ in versions.most_common()},
                    },
                )
            )
    return found


def _named(hostnames: Sequence[str], count: int) -> str:
    """`: a, b and 3 more`, or nothing when no names are known."""
    if not hostnames:
        return ""
    more = count - len(hostnames)
    return ": " + ", ".join(hostnames) + (f" and {more} more" if more > 0 else "")
