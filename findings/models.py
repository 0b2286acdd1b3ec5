"""Findings: every disagreement or problem any layer's rules raise, in one table.

A finding is written by its family's writer (`services.findings_write`) and read by every
page, the API, metrics and alerting. `node` and `cluster` point up to the clusters app by
string, the one exception to "an app imports only the layers below it": a finding about a
scheduler node links to it without this app importing clusters/.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from inventory.models import Server

from .choices import FindingType, Severity


class Finding(models.Model):
    """A disagreement between layers, kept open while it lasts and reopened if it returns.

    One row per (type, subject): `subject` names what it is about (`node:prod/gpu-b02`,
    `server:dgx-07`, `cluster:prod`), so a finding keeps its history across reconciliations.
    """

    type = models.CharField(max_length=32, choices=FindingType.choices)
    severity = models.CharField(max_length=16, choices=Severity.choices)
    subject = models.CharField(max_length=400)
    message = models.TextField()
    details = models.JSONField(default=dict, blank=True)
    server = models.ForeignKey(
        Server, null=True, blank=True, on_delete=models.CASCADE, related_name="findings"
    )
    node = models.ForeignKey(
        "clusters.Node", null=True, blank=True, on_delete=models.CASCADE, related_name="findings"
    )
    cluster = models.ForeignKey(
        "clusters.Cluster", null=True, blank=True, on_delete=models.CASCADE, related_name="findings"
    )
    # The GPU a health finding is about (health/rules.py); SET_NULL: the finding outlives a
    # pruned GPU row and says what it was in `subject` and `message`.
    gpu = models.ForeignKey(
        "inventory.Gpu",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="findings",
    )
    action = models.TextField(blank=True, default="", help_text="the next step to take, in words")
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    reopened_count = models.PositiveIntegerField(default=0)
    # A person's acknowledgement holds for one occurrence (`ack_occurrence` is the
    # `reopened_count` it was given at): resolving ends it, a reopened finding is new news.
    ack_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    ack_at = models.DateTimeField(null=True, blank=True)
    ack_reason = models.CharField(max_length=500, blank=True, default="")
    ack_occurrence = models.PositiveIntegerField(null=True, blank=True)
    # A silence hides the finding from the overview's counts and from alerting until it expires.
    silenced_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    silenced_at = models.DateTimeField(null=True, blank=True)
    silenced_until = models.DateTimeField(null=True, blank=True)
    silence_reason = models.CharField(max_length=500, blank=True, default="")
    # Who took an acknowledgement back, or ended a silence early, and when (the last time; the
    # acknowledgement's and the silence's own who, why and when stay as they were).
    ack_withdrawn_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    ack_withdrawn_at = models.DateTimeField(null=True, blank=True)
    silence_lifted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    silence_lifted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "clusters_finding"  # the table it had in clusters/, kept by the move
        ordering = ["resolved_at", "-last_seen", "id"]
        constraints = [
            models.UniqueConstraint(fields=["type", "subject"], name="finding_type_subject")
        ]
        indexes = [
            models.Index(fields=["resolved_at", "severity"]),
            models.Index(fields=["type", "resolved_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.subject}"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None

    @property
    def acknowledged(self) -> bool:
        """Acknowledged in this occurrence: open, and not reopened since the acknowledgement."""
        return (
            self.is_open and self.ack_at is not None and self.ack_occurrence == self.reopened_count
        )

    @property
    def ack_withdrawn(self) -> bool:
        """The last acknowledgement was taken back (and none given since)."""
        return self.ack_withdrawn_at is not None and (
            self.ack_at is None or self.ack_withdrawn_at >= self.ack_at
        )

    @property
    def silence_lifted(self) -> bool:
        """The last silence was ended early by a person (and none set since)."""
        return self.silence_lifted_at is not None and (
            self.silenced_at is None or self.silence_lifted_at >= self.silenced_at
        )

    def silenced(self, now=None) -> bool:
        return self.silenced_until is not None and self.silenced_until > (now or timezone.now())


OPEN = Q(resolved_at__isnull=True)
