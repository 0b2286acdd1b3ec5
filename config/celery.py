"""The Celery app. Settings come from Django's, prefixed CELERY_.

This module is the composition root of the task pipeline: the layers below never call
upwards, and what runs after what is wired here.
"""

import os

from celery import Celery
from celery.signals import task_success

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("cluster_atlas")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_success.connect
def _after_report_in_process(sender=None, result=None, **kwargs) -> None:
    """Embedded mode: reconcile right after a report that changed something, so its findings
    show at once (`manage.py runschedule` runs beat's ticks too, but up to an interval later).

    With a broker, beat's `reconcile-if-changed` tick coalesces thousands of reports into
    one run, so nothing is chained per report.
    """
    if not app.conf.task_always_eager or sender is None:
        return
    if sender.name == "inventory.tasks.apply_report" and result in ("applied", "superseded"):
        from health.tasks import record_health

        record_health.delay()  # beat's `record-health` tick does this with a broker
    if sender.name == "inventory.tasks.apply_report" and result == "applied":
        from clusters.tasks import reconcile

        reconcile.delay()
