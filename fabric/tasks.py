"""Celery adapters over fabric services: thin, idempotent, ids in."""

import logging

from celery import shared_task

from core.tasks import enqueue

from .findings import fabric_findings_sync, fabric_findings_sync_all
from .models import Fabric
from .render import fabric_figures_render
from .services import ethernet_fabric_sync, fabric_rebind

logger = logging.getLogger(__name__)


@shared_task(acks_late=True, ignore_result=True, time_limit=600)
def rebind_fabrics() -> None:
    """Bind every fabric's adapters again: servers that reported since the last snapshot
    bind by name without waiting for the next one. The Ethernet fabric is read again from
    the LLDP neighbours of the reports applied since the last pass."""
    ethernet_fabric_sync()
    for fabric in Fabric.objects.only("id", "name", "kind", "node_names"):
        fabric_rebind(fabric=fabric)


@shared_task(acks_late=True, ignore_result=True, time_limit=600)
def sync_fabric_findings(fabric_id: int) -> None:
    """One fabric's findings, after a snapshot, a name map or a tier changed it; then the
    stored figures at what they marked. Every stale one, not only this fabric's: a figure is
    stamped with the fabric revision, which any fabric's change moves, and a figure left
    stale is drawn by the next page that shows it (seconds at 25,000 servers)."""
    fabric = Fabric.objects.defer("node_name_map").filter(pk=fabric_id).first()
    if fabric is not None:
        fabric_findings_sync(fabric=fabric)
        fabric_figures_render()  # at the revision and findings just written


@shared_task(acks_late=True, ignore_result=True, time_limit=900)
def sync_all_fabric_findings() -> None:
    """Every fabric's findings, periodically: servers come, go and change GPUs in between."""
    fabric_findings_sync_all()
    fabric_figures_render()


def findings_soon(fabric_id: int) -> None:
    """Enqueue a fabric's findings after the commit; with the broker away the periodic pass
    catches up."""
    enqueue(sync_fabric_findings, fabric_id)
