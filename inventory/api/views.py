"""Inventory API: agent reports in, servers/GPUs/MIG devices out. Thin: parse, call, answer."""

from __future__ import annotations

from django.conf import settings
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.filters import OrderingFilter
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import IsStaffOrReadOnly

from .. import selectors
from ..filters import GpuFilter, MigDeviceFilter, ServerFilter
from ..services import ReportRejected, report_receive, revision_bump
from ..tasks import enqueue_report
from .authentication import AgentTokenAuthentication, IsAgent
from .serializers import (
    GpuListSerializer,
    MigDeviceListSerializer,
    ReportAcceptedSerializer,
    ReportRejectedSerializer,
    ServerDetailSerializer,
    ServerSerializer,
)


class ReportView(APIView):
    """POST an agent report (JSON, `Authorization: Token <agent token>`)."""

    authentication_classes = [AgentTokenAuthentication]
    permission_classes = [IsAgent]
    throttle_classes: list = []

    @extend_schema(
        request={"application/json": {"type": "object", "description": "docs/report.md"}},
        responses={
            202: ReportAcceptedSerializer,
            400: ReportRejectedSerializer,
            403: ReportRejectedSerializer,
            413: ReportRejectedSerializer,
        },
        summary="Receive an agent report",
    )
    def post(self, request):
        length = request.META.get("CONTENT_LENGTH") or "0"
        limit = settings.ATLAS_REPORT_MAX_BYTES
        if not length.isdigit() or int(length) > limit:
            return _rejected(
                ReportRejected(413, {"body": [f"report larger than the limit of {limit} bytes"]})
            )
        try:
            result = report_receive(token=request.auth, body=request.body, enqueue=enqueue_report)
        except ReportRejected as exc:
            return _rejected(exc)
        return Response(
            {"id": result.report_id, "status": result.status, "server": result.server_id},
            status=status.HTTP_202_ACCEPTED,
        )


def _rejected(exc: ReportRejected) -> Response:
    detail = {400: "malformed report", 403: "forbidden", 413: "report too large"}
    return Response(
        {"detail": detail.get(exc.status_code, "rejected"), "errors": exc.errors},
        status=exc.status_code,
    )


class ServerViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Servers: the physical layer. PATCH sets rack, rack_position and physical_host."""

    permission_classes = [permissions.IsAuthenticated, IsStaffOrReadOnly]
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = ServerFilter
    ordering_fields = ["hostname", "last_seen", "gpu_count", "mig_device_count", "rack", "id"]
    ordering = ["hostname", "id"]
    http_method_names = ["get", "patch", "head", "options"]

    def get_queryset(self):
        if self.action == "retrieve":
            return selectors.server_detail()
        return selectors.server_list()

    def get_serializer_class(self):
        return ServerDetailSerializer if self.action == "retrieve" else ServerSerializer

    def perform_update(self, serializer) -> None:
        serializer.save()
        revision_bump(name="inventory")  # racks and VM hosts change figures and failure domains

    def update(self, request, *args, **kwargs):
        super().update(request, *args, **kwargs)
        return Response(ServerSerializer(selectors.server_list().get(pk=kwargs["pk"])).data)


class GpuViewSet(viewsets.ReadOnlyModelViewSet):
    """GPUs: resources inside servers (never nodes). `?server=ID`, `?model=`, `?status=`."""

    serializer_class = GpuListSerializer
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = GpuFilter
    ordering_fields = ["id", "index", "name", "memory_total_bytes"]
    ordering = ["server_id", "index"]

    def get_queryset(self):
        return selectors.gpu_list()


class MigDeviceViewSet(viewsets.ReadOnlyModelViewSet):
    """MIG devices: slices of one GPU (still not nodes). `?server=`, `?gpu=`, `?profile=`."""

    serializer_class = MigDeviceListSerializer
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = MigDeviceFilter
    ordering_fields = ["id", "profile", "memory_bytes"]
    ordering = ["gpu_id", "gpu_instance_id", "compute_instance_id"]

    def get_queryset(self):
        return selectors.mig_device_list()
