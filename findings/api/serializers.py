"""Findings API representations: the finding with its links, acknowledgement and silence, and
the bodies of a person's actions."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Finding
from ..runbook import runbook_url
from ..services import BULK_MAX, REASON_MAX, silence_until_errors


class FindingActionSerializer(serializers.Serializer):
    by = serializers.CharField(allow_null=True)
    at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField()
    until = serializers.DateTimeField(allow_null=True)


class FindingUndoSerializer(serializers.Serializer):
    by = serializers.CharField(allow_null=True, help_text="who took it back")
    at = serializers.DateTimeField(help_text="when")


def _undo(user, at) -> dict:
    return {"by": user.get_username() if user else None, "at": at.isoformat()}


class FindingSerializer(serializers.ModelSerializer):
    server_hostname = serializers.CharField(
        source="server.hostname", read_only=True, default=None, allow_null=True
    )
    node_name = serializers.CharField(
        source="node.name", read_only=True, default=None, allow_null=True
    )
    cluster_name = serializers.CharField(
        source="cluster.name", read_only=True, default=None, allow_null=True
    )
    open = serializers.BooleanField(source="is_open", read_only=True)
    runbook_url = serializers.SerializerMethodField()
    acknowledgement = serializers.SerializerMethodField()
    silence = serializers.SerializerMethodField()
    acknowledgement_withdrawn = serializers.SerializerMethodField()
    silence_lifted = serializers.SerializerMethodField()

    class Meta:
        model = Finding
        fields = [
            "id",
            "type",
            "severity",
            "subject",
            "message",
            "first_seen",
            "last_seen",
            "resolved_at",
            "open",
            "reopened_count",
            "server",
            "server_hostname",
            "node",
            "node_name",
            "cluster",
            "cluster_name",
            "details",
            "runbook_url",
            "acknowledgement",
            "silence",
            "acknowledgement_withdrawn",
            "silence_lifted",
        ]

    def get_runbook_url(self, finding: Finding) -> str:
        url = runbook_url(finding.type)
        request = self.context.get("request")
        return request.build_absolute_uri(url) if request is not None else url

    @extend_schema_field(FindingActionSerializer(allow_null=True))
    def get_acknowledgement(self, finding: Finding) -> dict | None:
        """Who acknowledged this occurrence, when and why; null when nobody has (or it reopened)."""
        if not finding.acknowledged:
            return None
        return {
            "by": finding.ack_by.get_username() if finding.ack_by else None,
            "at": finding.ack_at.isoformat() if finding.ack_at else None,
            "reason": finding.ack_reason,
            "until": None,
        }

    @extend_schema_field(FindingActionSerializer(allow_null=True))
    def get_silence(self, finding: Finding) -> dict | None:
        """The silence in force (null when none, or expired)."""
        if not finding.silenced():
            return None
        return {
            "by": finding.silenced_by.get_username() if finding.silenced_by else None,
            "at": finding.silenced_at.isoformat() if finding.silenced_at else None,
            "reason": finding.silence_reason,
            "until": finding.silenced_until.isoformat() if finding.silenced_until else None,
        }

    @extend_schema_field(FindingUndoSerializer(allow_null=True))
    def get_acknowledgement_withdrawn(self, finding: Finding) -> dict | None:
        """Who took the last acknowledgement back and when; null unless it was (and none since)."""
        if not finding.ack_withdrawn:
            return None
        return _undo(finding.ack_withdrawn_by, finding.ack_withdrawn_at)

    @extend_schema_field(FindingUndoSerializer(allow_null=True))
    def get_silence_lifted(self, finding: Finding) -> dict | None:
        """Who ended the last silence early and when; null unless one was (and none since)."""
        if not finding.silence_lifted:
            return None
        return _undo(finding.silence_lifted_by, finding.silence_lifted_at)


class FindingAcknowledgeSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=REASON_MAX, help_text="why: who is on it, a ticket")


class FindingSilenceSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=REASON_MAX, help_text="why it may stay quiet")
    until = serializers.DateTimeField(help_text="when the silence ends (at most 90 days ahead)")

    def validate_until(self, value):
        errors = silence_until_errors(until=value, now=timezone.now())
        if errors:
            raise serializers.ValidationError(errors)
        return value


class FindingIdsSerializer(serializers.Serializer):
    ids = serializers.ListField(
        # an id is a 64-bit key: a larger number is a field-level 400, not an overflow in SQL
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
        allow_empty=False,
        max_length=BULK_MAX,
        help_text=f"the findings to act on (at most {BULK_MAX})",
    )


class FindingBulkAcknowledgeSerializer(FindingIdsSerializer, FindingAcknowledgeSerializer):
    pass


class FindingBulkSilenceSerializer(FindingIdsSerializer, FindingSilenceSerializer):
    pass


class FindingSkippedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    reason = serializers.CharField(help_text="why the action did not fit this finding")


class FindingBulkOutcomeSerializer(serializers.Serializer):
    done = serializers.ListField(
        child=serializers.IntegerField(), help_text="the findings acted on"
    )
    skipped = FindingSkippedSerializer(many=True, help_text="the findings left as they were")
