"""Scheduler-layer API: clusters, snapshots, nodes, manual bindings."""

from __future__ import annotations

from django.http.request import RawPostDataException
from django.shortcuts import get_object_or_404
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.filters import OrderingFilter
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.body_limit import BodyLimit
from core.api.errors import ErrorSerializer
from core.api.pagination import DeferredJoinPagination
from core.api.permissions import IsStaffOrReadOnly, staff_post_action
from core.tasks import enqueue

from .. import selectors
from ..choices import SnapshotStatus
from ..filters import NodeFilter
from ..services import (
    SnapshotRejected,
    node_bind,
    snapshot_receive,
)
from ..tasks import enqueue_snapshot
from .serializers import (
    ClusterSerializer,
    DetailSerializer,
    NodeBindingSerializer,
    NodeSerializer,
    SnapshotResultSerializer,
    SnapshotSerializer,
)


class CanPushSnapshots(permissions.BasePermission):
    """Staff, or a user granted `clusters.change_cluster` (e.g. the account of a cron job)."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(user.is_staff or user.has_perm("clusters.change_cluster"))


class ClusterViewSet(viewsets.ModelViewSet):
    """Clusters and how their nodes arrive (pushed snapshots, kubeconfig, slurmrestd)."""

    serializer_class = ClusterSerializer
    permission_classes = [permissions.IsAuthenticated, IsStaffOrReadOnly]
    lookup_field = "name"
    lookup_value_regex = "[-a-zA-Z0-9_]+"
    filter_backends = [OrderingFilter]
    ordering = ["name"]

    def get_queryset(self):
        return selectors.cluster_list()

    def perform_create(self, serializer) -> None:
        self._answer_with_counts(serializer, serializer.save())

    def perform_update(self, serializer) -> None:
        self._answer_with_counts(serializer, serializer.save())

    def _answer_with_counts(self, serializer, cluster) -> None:
        """Answer with the node counts the list shows (the saved row has no annotations)."""
        serializer.instance = selectors.cluster_list().get(pk=cluster.pk)

    @extend_schema(request=None, responses={202: DetailSerializer, 503: DetailSerializer})
    @action(
        detail=True,
        methods=["post"],
        permission_classes=[permissions.IsAuthenticated, CanPushSnapshots],
    )
    def sync(self, request, name=None):
        """Pull this cluster now (kubeconfig or slurmrestd clusters)."""
        from ..tasks import sync_cluster

        cluster = self.get_object()
        if not cluster.pulls:
            return Response({"detail": "this cluster receives pushed snapshots"}, status=400)
        if not enqueue(sync_cluster, cluster.pk):
            return Response(
                {"detail": "the task broker is away: the cluster's next periodic pull runs"},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Retry-After": "30"},
            )
        return Response({"detail": "sync queued"}, status=status.HTTP_202_ACCEPTED)


class SnapshotView(APIView):
    """POST a scheduler's raw output: the body exactly as the tool printed it."""

    body_limit = BodyLimit("ATLAS_SNAPSHOT_MAX_BYTES", "snapshot too large")

    permission_classes = [permissions.IsAuthenticated, CanPushSnapshots]
    parser_classes: list = []  # the body is read raw; the snapshot services decode it

    @extend_schema(
        request={"text/plain": {"type": "string"}, "application/json": {"type": "object"}},
        parameters=[
            OpenApiParameter(
                "confirm",
                str,
                enum=["shrink"],
                description="apply even if half or more of the live nodes (or more than "
                "ATLAS_SNAPSHOT_MAX_GONE_NODES) would be gone",
            )
        ],
        responses={
            201: SnapshotResultSerializer,
            202: SnapshotResultSerializer,
            400: ErrorSerializer,
            413: ErrorSerializer,
        },
        summary="Post a kubectl / scontrol / sinfo / slurmrestd snapshot of a cluster",
        description="Accepted: `kubectl get nodes -o json` (or `-o yaml`), `kubectl get pods -A "
        "-o json`, `scontrol show node` (text, -o, -d, --json), `sinfo --json`, slurmrestd "
        "nodes responses v0.0.38-v0.0.44. A name not yet known creates the cluster. 201: "
        "applied. 202: stored, with `status` `pending` (larger than "
        "ATLAS_SNAPSHOT_SYNC_MAX_BYTES: a worker applies it; follow `url`) or `held` (it "
        "would mark half or more of the live nodes, or more than "
        "ATLAS_SNAPSHOT_MAX_GONE_NODES, gone: post the same node set again, or "
        "with `?confirm=shrink`).",
    )
    def post(self, request, name: str):
        try:  # a body over ATLAS_SNAPSHOT_MAX_BYTES never gets here (core/api/body_limit.py)
            raw = request.body
        except RawPostDataException:  # a multipart form already read by a CSRF check
            return _snapshot_rejected(SnapshotRejected("post the snapshot as the request body"))
        confirm = request.query_params.get("confirm")
        if confirm not in (None, "shrink"):
            return _snapshot_rejected(SnapshotRejected("the only value is 'shrink'", "confirm"))
        try:
            return self.receive(request, name, raw, confirm_shrink=confirm == "shrink")
        except SnapshotRejected as exc:
            return _snapshot_rejected(exc)

    def receive(self, request, name: str, raw: bytes, *, confirm_shrink: bool) -> Response:
        """Take a body that passed the size and query checks: a node set or a pod list.
        (A layer above may route other listings first: workloads takes jobs listings.)"""
        result = snapshot_receive(
            cluster_name=name, raw=raw, confirm_shrink=confirm_shrink, enqueue=enqueue_snapshot
        )
        body = SnapshotResultSerializer(result, context={"request": request}).data
        applied = result.status in (SnapshotStatus.APPLIED, SnapshotStatus.SUPERSEDED)
        return Response(body, status=201 if applied else status.HTTP_202_ACCEPTED)


def _snapshot_rejected(exc: SnapshotRejected) -> Response:
    return Response(
        {"detail": "snapshot rejected", "errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST
    )


class SnapshotDetailView(APIView):
    """What became of one snapshot: pending, applied, held (and why), failed (and where)."""

    @extend_schema(responses={200: SnapshotSerializer, 404: ErrorSerializer})
    def get(self, request, name: str, pk: int):
        snapshot = get_object_or_404(selectors.snapshot_list(), cluster_name=name, pk=pk)
        return Response(SnapshotSerializer(snapshot, context={"request": request}).data)


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    """Scheduler nodes with their bound server; GPUs are resources of a node, never nodes."""

    serializer_class = NodeSerializer
    lookup_value_regex = "[0-9]+"  # `nodes/null/binding/` is a 404, not a failed lookup
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = NodeFilter
    # Pages read their rows by id after a lean query picks them (core/api/pagination.py): a
    # deep page at 130k nodes no longer evaluates every skipped row's subqueries.
    pagination_class = DeferredJoinPagination
    ordering_fields = ["name", "gpu_capacity", "gpu_allocatable", "state", "last_seen", "id"]
    ordering = ["cluster__name", "name"]

    @extend_schema(parameters=[OpenApiParameter("include_gone", bool)])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def get_queryset(self):
        include_gone = self.request.query_params.get("include_gone") in ("1", "true")
        return selectors.node_list(include_gone=include_gone or self.action != "list")

    @extend_schema(request=NodeBindingSerializer, responses={200: NodeSerializer})
    @staff_post_action()
    def binding(self, request, pk=None):
        """Bind this node to a server by hand (a manual binding always wins), or unbind."""
        node = self.get_object()
        body = NodeBindingSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        node_bind(node=node, server=body.validated_data["server"])
        return Response(NodeSerializer(selectors.node_list(include_gone=True).get(pk=pk)).data)
