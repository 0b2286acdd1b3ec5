"""Celery adapters over fabric services: thin, idempotent, ids in."""

from celery import shared_task

from .models import Fabric
from .services import fabric_rebind


@shared_task(acks_late=True, ignore_result=True, time_limit=600)
def rebind_fabrics() -> None:
    """Bind every fabric's adapters again: servers that reported since the last snapshot
    bind by name without waiting for the next one."""
    for fabric in Fabric.objects.only("id", "name", "node_names"):
        fabric_rebind(fabric=fabric)
