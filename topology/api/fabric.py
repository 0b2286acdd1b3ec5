"""Fabric exports for schedulers, named as the scheduler names its nodes, and the check of a
scheduler's own topology against the discovered one. Thin: parse, call, answer."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.api.views import CanPushSnapshots
from clusters.choices import ClusterKind
from clusters.models import Cluster
from fabric.api.serializers import FabricFindingSerializer
from fabric.exports import (
    SchedulerTree,
    no_nodes_reason,
    parse_topology_conf,
    slurm_topology_conf,
    slurm_topology_yaml,
)
from fabric.findings import scheduler_topology_findings_sync
from fabric.models import Fabric
from fabric.parsers import FabricFormatError, decode
from fabric.parsers.records import guid_of
from fabric.rules import scheduler_guid_names, scheduler_topology_mismatch
from fabric.selectors import fabric_adapter_guids, fabric_nvlink_blocks, fabric_scheduler_tree

from ..fabric_names import (
    FabricNamesError,
    cluster_fabric,
    kubernetes_node_labels,
    slurm_node_names,
)

CLUSTER = OpenApiParameter(
    "cluster", str, description="the Slurm cluster whose node names to use (default: the one)"
)


def _invalid(exc: FabricNamesError | FabricFormatError, field: str = "body") -> None:
    raise serializers.ValidationError({getattr(exc, "field", field): [str(exc)]})


def _export(request: Request, name: str):
    fabric = get_object_or_404(Fabric, name=name)
    try:
        cluster, names = slurm_node_names(fabric, request.query_params.get("cluster") or None)
    except FabricNamesError as exc:
        _invalid(exc)
    tree, notes = fabric_scheduler_tree(fabric, names)
    when = fabric.applied_at.strftime("%Y-%m-%d %H:%M UTC") if fabric.applied_at else "never"
    header = (
        f"Slurm topology/tree of fabric {fabric.name} (snapshot of {when}), by Cluster Atlas\n"
        + (
            f"node names as Slurm cluster {cluster} names them, else host names"
            if cluster
            else "node names are host names (no Slurm cluster binds these servers)"
        )
        + f"\ngenerated {timezone.now():%Y-%m-%d %H:%M UTC}"
    )
    return fabric, tree, notes, header, names


class NoNodesSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="why no node can be listed, and what names them")
    unlisted = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text="each switch left out: `switch` and `reason`",
    )


def _no_nodes(fabric: Fabric, tree: SchedulerTree) -> Response | None:
    """409 when the tree lists no node: a topology.conf of comments alone (no `Nodes=`)
    would leave slurmctld's topology/tree plugin without a tree, so none is served."""
    if tree.nodes:
        return None
    body = {
        "detail": no_nodes_reason(tree, fabric.name),
        "unlisted": [{"switch": switch, "reason": why} for switch, why in tree.unlisted],
    }
    return Response(NoNodesSerializer(body).data, status=409)


CONFLICT = {409: NoNodesSerializer}


class FabricTopologyConfView(APIView):
    """Slurm's topology.conf (tree plugin) for a fabric; 409, saying why, when not one of
    its nodes can be named (switches left out are said in comments)."""

    @extend_schema(
        parameters=[CLUSTER],
        responses={(200, "text/plain"): OpenApiTypes.STR, **CONFLICT},
        summary="Slurm topology.conf (topology/tree) of a fabric",
    )
    def get(self, request: Request, name: str) -> HttpResponse | Response:
        fabric, tree, notes, header, _names = _export(request, name)
        conflict = _no_nodes(fabric, tree)
        if conflict is not None:
            return conflict
        return HttpResponse(
            slurm_topology_conf(tree, notes, header), content_type="text/plain; charset=utf-8"
        )


class FabricTopologyYamlView(APIView):
    """Slurm 24.11+'s topology.yaml for a fabric: its tree (the cluster default), and a
    block topology of its NVLink domains where its servers share any; 409 as topology.conf
    when not one node can be named."""

    @extend_schema(
        parameters=[CLUSTER],
        responses={(200, "text/plain"): OpenApiTypes.STR, **CONFLICT},
        summary="Slurm topology.yaml (tree) of a fabric",
    )
    def get(self, request: Request, name: str) -> HttpResponse | Response:
        fabric, tree, _notes, header, names = _export(request, name)
        conflict = _no_nodes(fabric, tree)
        if conflict is not None:
            return conflict
        blocks = fabric_nvlink_blocks(fabric, names)
        return HttpResponse(
            slurm_topology_yaml(tree, fabric.name, header, blocks),
            content_type="text/plain; charset=utf-8",
        )


class TopologyCompareSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    fabric = serializers.CharField()
    agrees = serializers.BooleanField()
    switches = serializers.IntegerField()
    findings = FabricFindingSerializer(many=True)


class ClusterTopologyView(APIView):
    """POST a Slurm cluster's topology.conf: compared with the discovered fabric."""

    permission_classes = [permissions.IsAuthenticated, CanPushSnapshots]

    @extend_schema(
        request={"text/plain": {"type": "string"}},
        parameters=[OpenApiParameter("fabric", str, description="default: the cluster's fabric")],
        responses={200: TopologyCompareSerializer},
        summary="Compare a Slurm topology.conf with the discovered fabric",
    )
    def post(self, request: Request, name: str) -> Response:
        cluster = get_object_or_404(Cluster, name=name)
        if cluster.kind != ClusterKind.SLURM:
            raise serializers.ValidationError({"name": [f"{name!r} is not a Slurm cluster"]})
        try:
            pushed = parse_topology_conf(decode(request.body))
        except FabricFormatError as exc:
            _invalid(exc)
        try:
            fabric = cluster_fabric(cluster, request.query_params.get("fabric") or None)
            _, names = slurm_node_names(fabric, cluster.name)
        except FabricNamesError as exc:
            _invalid(exc)
        pushed, by_guid = scheduler_guid_names(
            cluster.name, pushed, fabric_adapter_guids(fabric, names)
        )
        spelled = {guid_of(n) for ns in pushed.nodes.values() for n in ns} - {None}
        discovered, _ = fabric_scheduler_tree(fabric, names, by_guid={g for g in spelled if g})
        findings = by_guid + scheduler_topology_mismatch(cluster.name, pushed, discovered)
        scheduler_topology_findings_sync(
            cluster_name=cluster.name, cluster_id=cluster.pk, found=findings
        )
        body = {
            "cluster": cluster.name,
            "fabric": fabric.name,
            "agrees": not findings,
            "switches": len(pushed.nodes) + len(pushed.children),
            "findings": findings,
        }
        return Response(TopologyCompareSerializer(body).data)


class NodeLabelsSerializer(serializers.Serializer):
    node = serializers.CharField()
    node_id = serializers.IntegerField()
    cluster = serializers.CharField()
    server = serializers.IntegerField()
    server_hostname = serializers.CharField()
    labels = serializers.DictField(child=serializers.CharField())
    to_set = serializers.DictField(
        child=serializers.CharField(), help_text="suggested labels the node lacks or differs on"
    )
    kubectl = serializers.CharField(help_text="the command that sets `to_set`; empty if none")


class FabricKubernetesLabelsView(APIView):
    """Suggested Kubernetes node labels for the switch tiers, per node on the fabric."""

    @extend_schema(
        parameters=[
            OpenApiParameter("cluster", str, description="one Kubernetes cluster's nodes only")
        ],
        responses={200: NodeLabelsSerializer(many=True)},
        summary="Kubernetes node labels for a fabric's switch tiers (leaf, spine, core)",
    )
    def get(self, request: Request, name: str) -> Response:
        fabric = get_object_or_404(Fabric, name=name)
        try:
            nodes = kubernetes_node_labels(fabric, request.query_params.get("cluster") or None)
        except FabricNamesError as exc:
            _invalid(exc)
        return Response(NodeLabelsSerializer(nodes, many=True).data)
