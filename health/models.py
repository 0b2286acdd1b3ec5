"""GPU health over time: kernel-log events, counter samples, and where the sweep stands.

A GPU keeps its history by serial across servers and slots: events and samples name the GPU
row and copy its serial, server and PCI bus as they were when it happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone

from core.links import workload_path
from inventory.models import Gpu, Server

from .choices import EventKind, Severity


class HealthEvent(models.Model):
    """One episode of a health event: the same kind and code on one GPU (or, without a GPU,
    one PCI bus of one server) seen `count` times from `first_seen` to `last_seen`.

    Repeats merge into the episode; a quiet gap longer than ATLAS_HEALTH_EPISODE_GAP_S starts
    a new one, so a storm of 100,000 lines is one row and a recurrence a week later another.
    `dedupe_key` (server, subject, kind, code, start) makes each episode exist once.
    """

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="health_events")
    gpu = models.ForeignKey(
        Gpu, null=True, blank=True, on_delete=models.SET_NULL, related_name="health_events"
    )
    gpu_serial = models.CharField(max_length=128, blank=True, default="", db_index=True)
    gpu_uuid = models.CharField(max_length=96, blank=True, default="")
    pci_bus_id = models.CharField(max_length=32, blank=True, default="")
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    code = models.PositiveIntegerField(null=True, blank=True)
    severity = models.CharField(max_length=16, choices=Severity.choices)
    action = models.CharField(max_length=300, blank=True, default="")
    message = models.CharField(max_length=500, blank=True, default="")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)
    count = models.PositiveBigIntegerField(default=1)
    dedupe_key = models.CharField(max_length=200, unique=True)
    updated_at = models.DateTimeField(default=timezone.now)
    # The workload that held the GPU when the episode began, copied by the workloads layer
    # (`workloads.services.holders`; health never reads workloads): `workload_id`,
    # `scheduler_id`, `user`, `account`, `cluster`, `kind`; null while none is known.
    holder = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen", "-id"]
        indexes = [
            models.Index(fields=["server", "-last_seen"]),
            models.Index(fields=["gpu", "-last_seen"]),
            models.Index(fields=["code", "-last_seen"]),
            models.Index(fields=["severity", "-last_seen"]),
        ]

    def __str__(self) -> str:
        code = f" {self.code}" if self.code is not None else ""
        return f"{self.get_kind_display()}{code} x{self.count}"

    @property
    def holder_words(self) -> str:
        """ "job 5679 of alice", "pods ml/trainer of namespace ml", or "" without a holder."""
        return holder_words(self.holder)

    @property
    def sentence(self) -> str:
        """ "Xid 79 on dgx-07 GPU 3 at 10:02 while job 5679 of alice held it" (the server and
        GPU rows read with it: `select_related`)."""
        what = (
            f"{self.get_kind_display()} {self.code}"
            if self.code is not None
            else (self.get_kind_display())
        )
        where = self.server.hostname
        if self.gpu_id is not None and self.gpu is not None and self.gpu.index is not None:
            where += f" GPU {self.gpu.index}"
        elif self.pci_bus_id:
            where += f" {self.pci_bus_id}"
        words = f"{what} on {where} at {timezone.localtime(self.first_seen):%Y-%m-%d %H:%M}"
        holder = self.holder_words
        return f"{words} while {holder} held it" if holder else words

    @property
    def holder_path(self) -> str:
        """The holder's workload page, or "" without a holder."""
        wid = (self.holder or {}).get("workload_id")
        return workload_path(int(wid)) if wid else ""


def holder_words(holder: Mapping[str, Any] | None) -> str:
    """The holder of `HealthEvent.holder` in a few words, as the workloads layer wrote them
    when it named it ("job 5679 of alice"; plain text: pages escape it)."""
    return str((holder or {}).get("words") or "")


class HealthEventReceipt(models.Model):
    """A report event already counted, by its fingerprint (the agent's key, else its content):
    an agent that sends a batch twice after a failed delivery changes no count."""

    fingerprint = models.CharField(max_length=64, unique=True)
    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="+")
    received_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return self.fingerprint[:12]


class GpuCounterSample(models.Model):
    """A GPU's health counters as of `taken_at`, written only when one changed (or the GPU
    moved): the rows of one GPU are its counters over time. The `current` row also carries
    the volatile state (P-state, clock-event reasons, link generation), updated in place."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="counter_samples")
    server = models.ForeignKey(
        Server, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    pci_bus_id = models.CharField(max_length=32, blank=True, default="")
    taken_at = models.DateTimeField()
    current = models.BooleanField(default=True)

    ecc_volatile_corrected = models.PositiveBigIntegerField(null=True, blank=True)
    ecc_volatile_uncorrected = models.PositiveBigIntegerField(null=True, blank=True)
    ecc_aggregate_corrected = models.PositiveBigIntegerField(null=True, blank=True)
    ecc_aggregate_uncorrected = models.PositiveBigIntegerField(null=True, blank=True)
    ecc_locations = models.JSONField(default=list, blank=True)
    retired_pages_single_bit = models.PositiveIntegerField(null=True, blank=True)
    retired_pages_double_bit = models.PositiveIntegerField(null=True, blank=True)
    retired_pages_pending = models.BooleanField(null=True, blank=True)
    remapped_rows_correctable = models.PositiveIntegerField(null=True, blank=True)
    remapped_rows_uncorrectable = models.PositiveIntegerField(null=True, blank=True)
    remapped_rows_pending = models.BooleanField(null=True, blank=True)
    remapped_rows_failure = models.BooleanField(null=True, blank=True)
    pcie_link_gen_max = models.PositiveSmallIntegerField(null=True, blank=True)
    pcie_link_width_current = models.PositiveSmallIntegerField(null=True, blank=True)
    pcie_link_width_max = models.PositiveSmallIntegerField(null=True, blank=True)
    pcie_replay_count = models.PositiveBigIntegerField(null=True, blank=True)
    nvlink_crc_errors = models.PositiveBigIntegerField(null=True, blank=True)
    nvlink_replay_errors = models.PositiveBigIntegerField(null=True, blank=True)
    nvlink_recovery_errors = models.PositiveBigIntegerField(null=True, blank=True)
    recovery_action = models.CharField(max_length=32, blank=True, default="")
    # volatile state: moves with load, so it never makes a new row by itself
    pcie_link_gen_current = models.PositiveSmallIntegerField(null=True, blank=True)
    performance_state = models.PositiveSmallIntegerField(null=True, blank=True)
    clock_event_reasons = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["gpu_id", "-taken_at", "-id"]
        indexes = [models.Index(fields=["gpu", "-taken_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu"], condition=Q(current=True), name="counter_sample_one_current"
            )
        ]

    def __str__(self) -> str:
        return f"GPU {self.gpu_id} counters @ {self.taken_at:%Y-%m-%d %H:%M}"


class HealthCursor(models.Model):
    """How far the health sweep has read the stored reports (every report up to `report_id`
    is recorded or was never to be)."""

    name = models.CharField(max_length=32, primary_key=True)
    report_id = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.name}@{self.report_id}"
