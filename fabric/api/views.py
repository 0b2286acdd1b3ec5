"""Fabric API: snapshots and node-name maps in; fabrics, switches, adapters, cables, per-server
bandwidth and findings out. Thin: parse, call one service or selector, answer."""

from __future__ import annotations

from dataclasses import asdict

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, mixins, permissions, status, viewsets
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.body_limit import BodyLimit
from core.api.permissions import IsStaffOrReadOnly

from .. import selectors
from ..filters import AdapterFilter, FabricLinkFilter, FabricSnapshotFilter, SwitchFilter
from ..models import Fabric
from ..services import FabricRejected, fabric_snapshot_ingest, node_name_map_set, switch_tier_set
from .serializers import (
    AdapterSerializer,
    FabricFindingSerializer,
    FabricLinkSerializer,
    FabricSerializer,
    FabricSnapshotResultSerializer,
    FabricSnapshotSerializer,
    NameMapResultSerializer,
    RejectedSerializer,
    ServerBandwidthSerializer,
    SwitchSerializer,
    TierOverrideSerializer,
)

TEXT = {"text/plain": {"type": "string"}}
SNAPSHOT_LIMIT = BodyLimit("ATLAS_SNAPSHOT_MAX_BYTES")


class CanChangeFabric(permissions.BasePermission):
    """Staff, or a user granted `fabric.change_fabric` (e.g. the account of a cron job)."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user.is_staff or user.has_perm("fabric.change_fabric"))


def _rejected(exc: FabricRejected, what: str) -> Response:
    return Response(
        {"detail": f"{what} rejected", "errors": {exc.field: [str(exc)]}},
        status=status.HTTP_400_BAD_REQUEST,
    )


class FabricViewSet(viewsets.ReadOnlyModelViewSet):
    """Fabrics (InfiniBand subnets): counts of the last snapshot, tiers, rails, leaf groups."""

    serializer_class = FabricSerializer
    lookup_field = "name"
    lookup_value_regex = "[-a-zA-Z0-9_]+"
    filter_backends = [OrderingFilter]
    ordering_fields = ["name", "applied_at", "id"]
    ordering = ["name"]

    def get_queryset(self):
        return selectors.fabric_list()


class FabricSnapshotView(APIView):
    """POST a raw `ibnetdiscover` output: the body exactly as the tool printed it."""

    body_limit = SNAPSHOT_LIMIT

    permission_classes = [permissions.IsAuthenticated, CanChangeFabric]

    @extend_schema(
        request=TEXT,
        responses={
            201: FabricSnapshotResultSerializer,
            400: RejectedSerializer,
            413: RejectedSerializer,
        },
        summary="Post an ibnetdiscover (or ibnetdiscover -p) output of a fabric",
        description="The format is detected. A name not yet known creates the fabric. An "
        "output with no switch, or cut short, is refused with 400 and the fabric keeps its "
        "last good state.",
    )
    def post(self, request: Request, name: str) -> Response:
        try:
            result = fabric_snapshot_ingest(fabric_name=name, raw=request.body)
        except FabricRejected as exc:
            return _rejected(exc, "snapshot")
        return Response(asdict(result), status=status.HTTP_201_CREATED)


class NodeNameMapView(APIView):
    """A fabric's node-name map, in ibnetdiscover's own format (`0x<guid> "name"`)."""

    body_limit = SNAPSHOT_LIMIT

    def get_permissions(self):
        if self.request.method == "PUT":
            return [permissions.IsAuthenticated(), CanChangeFabric()]
        return [permissions.IsAuthenticated()]

    @extend_schema(responses={(200, "text/plain"): OpenApiTypes.STR}, summary="The node-name map")
    def get(self, request: Request, name: str) -> HttpResponse:
        fabric = get_object_or_404(Fabric.objects.only("node_name_map"), name=name)
        return HttpResponse(fabric.node_name_map, content_type="text/plain; charset=utf-8")

    @extend_schema(
        request=TEXT,
        responses={200: NameMapResultSerializer, 400: RejectedSerializer, 413: RejectedSerializer},
        summary="Set the node-name map; it names and binds past and future snapshots' nodes",
    )
    def put(self, request: Request, name: str) -> Response:
        try:
            result = node_name_map_set(fabric_name=name, raw=request.body)
        except FabricRejected as exc:
            return _rejected(exc, "node-name map")
        return Response(asdict(result))


class FabricServersView(generics.GenericAPIView):
    """Per server on the fabric: NICs, bandwidth, GPUs, bandwidth and NICs per GPU, leaves."""

    serializer_class = ServerBandwidthSerializer
    queryset = Fabric.objects.none()  # the schema's model; get() reads through a selector

    @extend_schema(responses={200: ServerBandwidthSerializer(many=True)})
    def get(self, request: Request, name: str) -> Response:
        fabric = get_object_or_404(Fabric, name=name)
        page = self.paginate_queryset(selectors.fabric_host_bandwidth(fabric))
        return self.get_paginated_response(ServerBandwidthSerializer(page, many=True).data)


class FabricFindingsView(generics.GenericAPIView):
    """What the fabric rules find now (slow or narrow cables, ports gone, NICs on another
    rail's leaf, GPU servers missing from the fabric or short of network). Not stored."""

    serializer_class = FabricFindingSerializer
    queryset = Fabric.objects.none()  # the schema's model; get() reads through a selector

    @extend_schema(responses={200: FabricFindingSerializer(many=True)})
    def get(self, request: Request, name: str) -> Response:
        fabric = get_object_or_404(Fabric, name=name)
        page = self.paginate_queryset(selectors.fabric_findings(fabric))
        return self.get_paginated_response(FabricFindingSerializer(page, many=True).data)


class _GoneMixin:
    @extend_schema(parameters=[OpenApiParameter("include_gone", bool)])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)  # type: ignore[misc]

    def _include_gone(self) -> bool:
        asked = self.request.query_params.get("include_gone") in ("1", "true")  # type: ignore[attr-defined]
        return asked or self.action != "list"  # type: ignore[attr-defined]


class SwitchViewSet(
    _GoneMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Switches: `?fabric=NAME`, `?tier=1`, `?rail=`. PATCH `tier_override` (staff)."""

    serializer_class = SwitchSerializer
    permission_classes = [permissions.IsAuthenticated, IsStaffOrReadOnly]
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = SwitchFilter
    ordering_fields = ["name", "tier_inferred", "ports_used", "rail", "id"]
    ordering = ["fabric__name", "name", "id"]
    http_method_names = ["get", "patch", "head", "options"]

    def get_queryset(self):
        return selectors.switch_list(include_gone=self._include_gone())

    @extend_schema(request=TierOverrideSerializer, responses={200: SwitchSerializer})
    def partial_update(self, request: Request, *args, **kwargs) -> Response:
        switch = self.get_object()
        body = TierOverrideSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        switch_tier_set(switch=switch, tier=body.validated_data["tier_override"])
        return Response(
            SwitchSerializer(selectors.switch_list(include_gone=True).get(pk=switch.pk)).data
        )


class AdapterViewSet(_GoneMixin, viewsets.ReadOnlyModelViewSet):
    """Adapters: server NICs (bound, or listed unbound: `?bound=false`), SHARP aggregation
    nodes and routers. `?fabric=`, `?server=`, `?role=`, `?rail=`, `?search=`."""

    serializer_class = AdapterSerializer
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = AdapterFilter
    ordering_fields = ["host_name", "nic", "guid", "rail", "id"]
    ordering = ["fabric__name", "host_name", "nic", "guid"]

    def get_queryset(self):
        return selectors.adapter_list(include_gone=self._include_gone())


class FabricLinkViewSet(_GoneMixin, viewsets.ReadOnlyModelViewSet):
    """Cables with both ends (switch port or server NIC), rate (`4xNDR`) and Gb/s.
    `?fabric=`, `?state=up|down`, `?switch=ID`, `?server=ID`, `?speed=4xHDR`."""

    serializer_class = FabricLinkSerializer
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = FabricLinkFilter
    ordering_fields = ["key", "gbps", "id"]
    ordering = ["fabric__name", "key"]

    def get_queryset(self):
        return selectors.link_list(include_gone=self._include_gone())


class FabricSnapshotViewSet(viewsets.ReadOnlyModelViewSet):
    """Snapshots received, applied or refused (with why); the raw text is not listed."""

    serializer_class = FabricSnapshotSerializer
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = FabricSnapshotFilter
    ordering = ["-received_at", "-id"]

    def get_queryset(self):
        return selectors.snapshot_list()
