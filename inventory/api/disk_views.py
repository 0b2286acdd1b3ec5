"""Local disks of the fleet's servers: `GET /api/v1/disks/?server=ID` (also `transport=`,
`serial=`). Kept apart from views.py, whose report endpoint changes on its own schedule."""

from __future__ import annotations

from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import viewsets
from rest_framework.filters import OrderingFilter

from .. import selectors
from ..filters import DiskFilter
from .serializers import DiskListSerializer


class DiskViewSet(viewsets.ReadOnlyModelViewSet):
    """Disks: NVMe and other local drives as each server's agent reports them."""

    serializer_class = DiskListSerializer
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = DiskFilter
    ordering_fields = ["id", "name", "size_bytes"]
    ordering = ["server_id", "name"]

    def get_queryset(self):
        return selectors.disk_list()
