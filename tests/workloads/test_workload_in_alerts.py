"""Webhook bodies and Alertmanager alerts about a GPU name the workload that held it when
the finding was raised (issue 24, 5)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from findings.models import Finding
from integrations.alerts import FINDING_FIELDS
from integrations.models import Delivery, Webhook
from integrations.services.alertmanager import alerts_due
from integrations.services.webhooks import webhook_outbox_scan
from inventory.models import Gpu
from tests.workloads.factories_joins import hold, server_with_gpus, workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def held_gpu_finding(settings):
    settings.ATLAS_PUBLIC_URL = "https://atlas.example.org"
    dgx = server_with_gpus("dgx-07")
    job = workload("5679", user="alice", account="ml-research")
    hold(job, dgx, [3], since=timezone.now() - timedelta(hours=1))
    gpu = Gpu.objects.get(server=dgx, index=3)
    on_gpu = Finding.objects.create(
        type="unhealthy_gpu",
        severity="critical",
        subject=f"gpu:{gpu.uuid}",
        message="dgx-07 GPU 3: Xid 79, fell off the bus",
        server=dgx,
        gpu=gpu,
    )
    idle = Finding.objects.create(
        type="unhealthy_gpu",
        severity="critical",
        subject="gpu:idle",
        message="dgx-07 GPU 5: Xid 48",
        server=dgx,
        gpu=Gpu.objects.get(server=dgx, index=5),
    )
    return job, on_gpu, idle


def test_a_webhook_body_names_the_workload_on_the_gpu(held_gpu_finding):
    job, on_gpu, idle = held_gpu_finding
    Webhook.objects.create(
        url="https://hooks.example.org/x",
        secret="s" * 24,
        events=["finding.raised"],
        created_at=timezone.now() - timedelta(minutes=5),
    )
    assert webhook_outbox_scan() == 2
    bodies = {d.finding_id: d.payload for d in Delivery.objects.all()}
    assert bodies[on_gpu.pk]["workload"] == {
        "id": job.pk,
        "scheduler_id": "5679",
        "kind": "slurm_job",
        "cluster": "hpc",
        "user": "alice",
        "account": "ml-research",
        "words": "job 5679 of alice",
        "url": f"https://atlas.example.org/workloads/{job.pk}/",
    }
    assert "workload" not in bodies[idle.pk]  # no job held GPU 5


def test_an_alert_about_a_held_gpu_carries_workload_labels(held_gpu_finding):
    _job, on_gpu, idle = held_gpu_finding
    now = timezone.now()
    alerts = {a["labels"]["subject"]: a for a in alerts_due(now=now, since=now)}
    held = alerts[on_gpu.subject]
    assert held["labels"]["workload"] == "5679" and held["labels"]["workload_user"] == "alice"
    assert held["annotations"]["workload"] == "job 5679 of alice"
    assert "workload" not in alerts[idle.subject]["labels"]


def test_a_finding_raised_after_the_job_ended_names_no_workload(held_gpu_finding):
    job, on_gpu, _idle = held_gpu_finding
    job.allocations.update(until=on_gpu.first_seen - timedelta(seconds=1))
    now = timezone.now()
    (alert,) = [
        a for a in alerts_due(now=now, since=now) if a["labels"]["subject"] == on_gpu.subject
    ]
    assert "workload" not in alert["labels"] and "workload" not in alert["annotations"]


def test_the_alert_scan_costs_two_queries_however_many_findings(
    held_gpu_finding, django_assert_num_queries
):
    assert "gpu_id" in FINDING_FIELDS
    now = timezone.now()
    with django_assert_num_queries(2):  # the findings, the allocations on their GPUs
        assert len(alerts_due(now=now, since=now)) == 2
