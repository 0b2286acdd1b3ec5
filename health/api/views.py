"""Health API: events with their catalog meaning, a GPU's history. Thin: filter, select, answer."""

from __future__ import annotations

from django.http import Http404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.filters import OrderingFilter
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import selectors
from ..filters import HealthEventFilter
from .serializers import GpuHistorySerializer, HealthEventSerializer


class HealthEventViewSet(viewsets.ReadOnlyModelViewSet):
    """GPU health events (XID, SXID, fallen off the bus, probe failures), one row per episode.
    Filters: `server`, `gpu`, `code`, `kind`, `severity`, `since`, `serial`."""

    serializer_class = HealthEventSerializer
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = HealthEventFilter
    ordering_fields = ["last_seen", "first_seen", "count", "code", "id"]
    ordering = ["-last_seen", "-id"]

    def get_queryset(self):
        return selectors.health_event_list()


class GpuHistoryView(APIView):
    """Every server and slot a GPU was in, its replacements, events and counters."""

    @extend_schema(responses=GpuHistorySerializer, summary="A GPU's lifecycle")
    def get(self, request, pk: int):
        history = selectors.gpu_history(gpu_id=pk)
        if history is None:
            raise Http404
        return Response(GpuHistorySerializer(history).data)
