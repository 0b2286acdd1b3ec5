"""Fabric findings kept: what the fabric rules say now, written as `findings.Finding` rows.

The rules are pure (fabric/rules.py) and the reads are in fabric/selectors.py; this module
only joins them to the project's one findings writer, as the fabric family, scoped so that a
fabric answers for its own findings and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from findings.choices import Family, FindingType
from findings.services import findings_write

from . import rules
from .models import Fabric
from .selectors import fabric_findings

TOPOLOGY_MISMATCH = FindingType.FABRIC_TOPOLOGY_MISMATCH
FABRIC_WIDE = ~Q(type=TOPOLOGY_MISMATCH)
"""The fabric family's findings judged per fabric; the scheduler-topology comparison is per
cluster and kept apart."""


@dataclass(frozen=True)
class FindingsResult:
    fabric: str
    open: int
    raised: int
    resolved: int


def fabric_scope(fabric_name: str) -> Q:
    """The fabric findings one fabric answers for: subjects under `fabric:<name>/`."""
    return FABRIC_WIDE & Q(subject__startswith=f"fabric:{fabric_name}/")


def fabric_findings_sync(*, fabric: Fabric, now=None) -> FindingsResult:
    """Raise, reopen and resolve one fabric's findings; a fixed number of queries whatever
    the fabric's size. Never touches another app's findings or another fabric's."""
    now = now or timezone.now()
    desired = {f.key: f for f in fabric_findings(fabric) if f.type != TOPOLOGY_MISMATCH}
    with transaction.atomic():
        raised, resolved, open_count = findings_write(
            desired=desired, now=now, family=Family.FABRIC, scope=fabric_scope(fabric.name)
        )
    return FindingsResult(fabric=fabric.name, open=open_count, raised=raised, resolved=resolved)


def fabric_findings_sync_all(*, now=None) -> list[FindingsResult]:
    """Every fabric's findings, and those of fabrics since deleted resolved."""
    now = now or timezone.now()
    results = [
        fabric_findings_sync(fabric=fabric, now=now)
        for fabric in Fabric.objects.defer("node_name_map")
    ]
    names = [r.fabric for r in results]
    orphans = FABRIC_WIDE
    for name in names:
        orphans &= ~Q(subject__startswith=f"fabric:{name}/")
    findings_write(desired={}, now=now, family=Family.FABRIC, scope=orphans)
    return results


def scheduler_topology_findings_sync(
    *, cluster_name: str, cluster_id: int | None, found: list[rules.FabricFinding], now=None
) -> FindingsResult:
    """Keep what comparing a cluster's pushed topology.conf with the fabric found: raised
    until a later push agrees. Scoped to that cluster's topology findings."""
    now = now or timezone.now()
    desired = {
        f.key: replace(f, cluster_id=cluster_id) for f in found if f.type == TOPOLOGY_MISMATCH
    }
    scope = Q(type=TOPOLOGY_MISMATCH, subject__startswith=f"cluster:{cluster_name}/topology")
    with transaction.atomic():
        raised, resolved, open_count = findings_write(
            desired=desired, now=now, family=Family.FABRIC, scope=scope
        )
    return FindingsResult(fabric=cluster_name, open=open_count, raised=raised, resolved=resolved)
