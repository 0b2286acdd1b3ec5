"""What follows across layers once workloads or nodes change (config/celery.py)."""

from __future__ import annotations

import pytest

from clusters.models import Node
from tests.workloads.fleet import job, listing, slurm_fleet
from workloads.models import Allocation
from workloads.services.apply import workloads_apply

pytestmark = pytest.mark.django_db


def test_a_reconcile_that_binds_nodes_joins_the_gpus_of_earlier_listings(settings):
    from clusters.tasks import reconcile

    hpc = slurm_fleet()
    Node.objects.filter(cluster=hpc).update(server=None, binding_method="")
    workloads_apply(cluster=hpc, snapshot=listing(job("1", ("gpu-01", (0, 1)))))
    assert not Allocation.objects.filter(gpu__isnull=False).exists()
    reconcile.delay(force=True)  # in-process: the follow-ups run at once, as a worker's would
    assert Allocation.objects.filter(gpu__isnull=False).count() == 2


def test_a_pulled_clusters_workloads_are_pulled_after_its_nodes(monkeypatch):
    from clusters.tasks import sync_cluster
    from config import celery
    from workloads import tasks

    pulled = []
    monkeypatch.setattr(
        tasks.sync_cluster_workloads, "apply_async", lambda args, kwargs, **_: pulled.append(args)
    )

    class Request:
        args = (42,)

    class Sender:
        name = sync_cluster.name
        request = Request()

    celery.after_task(sender=Sender(), result="ok")
    celery.after_task(sender=Sender(), result="failed")
    assert pulled == [(42,)]
