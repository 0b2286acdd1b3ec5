"""The Celery app (settings come from Django's, prefixed CELERY_), and the one place where
"after X, do Y" is wired across layers.

The layers below never call upwards: inventory does not know that clusters, health or
fabric read what it writes. What follows a change in one layer is scheduled by that layer's
service when it stays inside the layer, and here, by the composition root, when it crosses
upwards. The whole list:

after                           what follows                                wired by
------------------------------  ------------------------------------------  -----------------
a report is received            inventory.tasks.apply_report (through the   report_receive,
                                broker's breaker; else the sweep, 60 s)     on commit
a report is applied             clusters.tasks.reconcile_server: the        `after_task`
                                server's findings, then one full reconcile  here
                                requested (coalesced: `reconcile_soon`)
a report is applied or          health.tasks.record_health: its events and  `after_task`
superseded                      counters, then the health findings          here
health is recorded (new events) workloads.tasks.name_event_holders: each    `after_task`
                                event named by the workload on its GPU      here; beat (60 s)
a report is applied             workloads.tasks.record_workload_facts: its  `after_task`
                                GPU processes and pod devices, then the     here; beat (15 s)
                                workloads findings (coalesced)
a snapshot is applied (pushed,  clusters.tasks.reconcile (coalesced)        snapshot_*, on
pulled, imported, by a worker)                                              commit
a cluster's nodes are pulled    workloads.tasks.sync_cluster_workloads      `after_task`
                                (slurmrestd /jobs, or the pod list)         here
a jobs listing (or pod list)    workloads.tasks.after_listing (coalesced):  jobs_ingest, on
is applied                      the workloads findings, the events' holders commit
running workloads move          placement.tasks.judge_workloads: how well   beat (120 s): a
                                each is placed                              pass reads the
                                                                            whole fleet
a reconcile changed something   workloads.tasks.join_allocations (then the  `after_task`
                                workloads findings)                         here
a person binds/unbinds a node   clusters.tasks.reconcile (coalesced)        node_bind, on
                                                                            commit
a fabric snapshot, name map or  fabric.tasks.sync_fabric_findings           fabric.services,
tier changes                                                                on commit
servers report that a fabric    fabric.tasks.rebind_fabrics                 beat (5 min)
names
the inventory/node revisions    topology.tasks.render_fleet_figures and     beat (30 s); a
move                            placement.tasks.refresh_placement_summaries stale page draws
findings are raised/resolved    integrations.tasks.scan_webhook_outbox,     beat (15 s, 60 s)
                                push_alerts

Both modes run the same follow-ups: with a broker (a worker applies the report; Celery
sends `task_success` there, and the follow-ups are queued), and in-process
(`CELERY_TASK_ALWAYS_EAGER`, the embedded default: the follow-ups run here, at once).
Beat's schedule (`CELERY_BEAT_SCHEDULE`; `manage.py runschedule` without a broker) runs
each periodic pass in both modes too, as the safety net for a follow-up that was lost (a
broker away, a worker killed): every task is idempotent and each pass judges what changed.

A follow-up that fails is logged (Celery's signal dispatch, or `core.tasks.enqueue`) and
never fails the report: its facts are committed already.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import task_success

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("cluster_atlas")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

HEALTH_WINDOW_S = 2.0
"""With a broker, a burst of applied reports queues one `record_health` per this window per
worker process (each run records every report applied since the last one)."""

WORKLOAD_FACTS_WINDOW_S = 2.0
"""Likewise one `record_workload_facts` per window (each run stores every server whose newest
applied report is newer than its facts)."""

APPLY_REPORT = "inventory.tasks.apply_report"
SYNC_CLUSTER = "clusters.tasks.sync_cluster"
RECONCILE = "clusters.tasks.reconcile"
RECORD_HEALTH = "health.tasks.record_health"


@task_success.connect
def after_task(sender: Any = None, result: Any = None, **_: Any) -> None:
    """What follows a task across layers; see the table above. Called by Celery after every
    task that succeeds, in the worker that ran it (with a broker) or here (in-process)."""
    if sender is None:
        return
    if sender.name == APPLY_REPORT and isinstance(result, dict):
        after_report(result)
    elif sender.name == RECORD_HEALTH and isinstance(result, int) and result > 0:
        after_health(result)
    elif sender.name == SYNC_CLUSTER and result == "ok":
        after_cluster_sync(sender.request.args or ())

    elif sender.name == RECONCILE and result != "unchanged":
        after_reconcile()


def after_reconcile() -> None:
    """Nodes may have been bound: allocations that named their GPUs before join them."""
    from core.tasks import enqueue
    from workloads.tasks import join_allocations

    enqueue(join_allocations)


def after_cluster_sync(args: tuple[Any, ...] | list[Any]) -> None:
    """A pulled cluster's nodes are in: its workloads next (they name those nodes)."""
    from core.tasks import enqueue
    from workloads.tasks import sync_cluster_workloads

    if args:
        enqueue(sync_cluster_workloads, args[0])


def after_health(recorded: int) -> None:
    """The follow-up of a `record_health` pass that recorded something: the workloads layer
    names the job or pod that held each new event's GPU."""
    from core.tasks import enqueue
    from workloads.tasks import name_event_holders

    enqueue(name_event_holders)


def after_report(result: dict[str, Any]) -> None:
    """The follow-ups of one report, from what `apply_report` returned."""
    from clusters.tasks import reconcile_server
    from core.tasks import enqueue, enqueue_soon
    from health.tasks import record_health
    from inventory.choices import ReportStatus
    from workloads.tasks import record_workload_facts

    status = result.get("status")
    if status == ReportStatus.APPLIED and result.get("server_id") is not None:
        changed = bool(result.get("created") or result.get("identity_changed"))
        enqueue(reconcile_server, result["server_id"], identity_changed=changed)
    if status in (ReportStatus.APPLIED, ReportStatus.SUPERSEDED):
        enqueue_soon(record_health, window_s=HEALTH_WINDOW_S)
    if status == ReportStatus.APPLIED and result.get("server_id") is not None:
        # After health, so the findings pass sees the GPUs this report made need action.
        enqueue_soon(record_workload_facts, window_s=WORKLOAD_FACTS_WINDOW_S)
