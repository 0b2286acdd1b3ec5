"""Findings API: every family's findings, open and resolved, and a person's acknowledgement and
silence (`/api/v1/findings/`)."""

from __future__ import annotations

from django.db.models import F
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter
from rest_framework.response import Response

from core.api.permissions import staff_post_action

from .. import selectors
from ..filters import FindingFilter
from ..services import (
    BulkAction,
    FindingActionRejected,
    finding_acknowledge,
    finding_silence,
    finding_unacknowledge,
    finding_unsilence,
    findings_act,
)
from .serializers import (
    FindingAcknowledgeSerializer,
    FindingBulkAcknowledgeSerializer,
    FindingBulkOutcomeSerializer,
    FindingBulkSilenceSerializer,
    FindingIdsSerializer,
    FindingSerializer,
    FindingSilenceSerializer,
)


def _bulk(name: str):
    """`POST findings/<name>/` with `ids`: the action on many findings at once."""
    return staff_post_action(detail=False, url_path=name, url_name=f"bulk-{name}")


class FindingOrdering(OrderingFilter):
    """`?ordering=severity` means by weight (critical first, `selectors.finding_list`'s
    `severity_rank`), not by the names' alphabet; every ordering ends with id, so ties keep
    one order from page to page."""

    def get_ordering(self, request, queryset, view) -> list:
        ordering = []
        for term in super().get_ordering(request, queryset, view) or []:
            if isinstance(term, str) and term.lstrip("-") == "severity":
                term = term.replace("severity", "severity_rank")
            ordering.append(term)
        if not any(isinstance(t, str) and t.lstrip("-") in ("id", "pk") for t in ordering):
            ordering.append("id")
        return ordering


class FindingViewSet(viewsets.ReadOnlyModelViewSet):
    """Where layers disagree: open and resolved, by type and severity."""

    serializer_class = FindingSerializer
    lookup_value_regex = "[0-9]+"
    filter_backends = [DjangoFilterBackend, FindingOrdering]
    filterset_class = FindingFilter
    ordering_fields = ["last_seen", "first_seen", "severity", "type", "id"]
    # Open first, then the most recently resolved; each by severity, ties by id.
    ordering = [F("resolved_at").desc(nulls_first=True), "severity", "id"]

    def get_queryset(self):
        return selectors.finding_list()

    @extend_schema(request=FindingAcknowledgeSerializer, responses={200: FindingSerializer})
    @staff_post_action()
    def acknowledge(self, request, pk=None):
        """Say someone is on it (who, why, when); resolving the finding ends it."""
        body = FindingAcknowledgeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._act(finding_acknowledge, reason=body.validated_data["reason"])

    @extend_schema(request=FindingSilenceSerializer, responses={200: FindingSerializer})
    @staff_post_action()
    def silence(self, request, pk=None):
        """Hide the finding from the overview's counts and from alerting until `until`."""
        body = FindingSilenceSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._act(finding_silence, **body.validated_data)

    @extend_schema(request=None, responses={200: FindingSerializer})
    @staff_post_action()
    def unacknowledge(self, request, pk=None):
        """Take the acknowledgement back (who and when are recorded); 400 when there is none."""
        return self._act(finding_unacknowledge)

    @extend_schema(request=None, responses={200: FindingSerializer})
    @staff_post_action()
    def unsilence(self, request, pk=None):
        """End the silence now (who and when are recorded); 400 when there is none."""
        return self._act(finding_unsilence)

    @extend_schema(
        operation_id="v1_findings_bulk_acknowledge",
        request=FindingBulkAcknowledgeSerializer,
        responses={200: FindingBulkOutcomeSerializer},
    )
    @_bulk("acknowledge")
    def bulk_acknowledge(self, request):
        """Acknowledge many findings at once (`ids`, one `reason`), each recorded as one alone;
        those it does not fit (resolved, unknown) are listed in `skipped` with why."""
        return self._act_on_many(FindingBulkAcknowledgeSerializer, BulkAction.ACKNOWLEDGE)

    @extend_schema(
        operation_id="v1_findings_bulk_silence",
        request=FindingBulkSilenceSerializer,
        responses={200: FindingBulkOutcomeSerializer},
    )
    @_bulk("silence")
    def bulk_silence(self, request):
        """Silence many findings at once until `until` (`ids`, one `reason`)."""
        return self._act_on_many(FindingBulkSilenceSerializer, BulkAction.SILENCE)

    @extend_schema(
        operation_id="v1_findings_bulk_unacknowledge",
        request=FindingIdsSerializer,
        responses={200: FindingBulkOutcomeSerializer},
    )
    @_bulk("unacknowledge")
    def bulk_unacknowledge(self, request):
        """Take many acknowledgements back at once (`ids`); the unacknowledged are skipped."""
        return self._act_on_many(FindingIdsSerializer, BulkAction.UNACKNOWLEDGE)

    def _act_on_many(self, serializer, bulk_action: str) -> Response:
        body = serializer(data=self.request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        try:
            outcome = findings_act(
                finding_ids=data.pop("ids"), user=self.request.user, action=bulk_action, **data
            )
        except FindingActionRejected as exc:
            raise ValidationError(exc.errors) from exc
        skipped = [{"id": i, "reason": why} for i, why in sorted(outcome.skipped.items())]
        return Response({"done": outcome.done, "skipped": skipped})

    def _act(self, service, **kwargs) -> Response:
        finding = self.get_object()
        try:
            service(finding=finding, user=self.request.user, **kwargs)
        except FindingActionRejected as exc:
            raise ValidationError(exc.errors) from exc
        fresh = self.get_queryset().get(pk=finding.pk)
        return Response(FindingSerializer(fresh, context=self.get_serializer_context()).data)
