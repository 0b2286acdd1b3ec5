"""Fabric exports for schedulers, named as the scheduler names its nodes, and the check of a
scheduler's own topology against the discovered one. Thin: parse, call, answer."""

from __future__ import annotations

import json
from typing import Any

import yaml
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.api.views import CanPushSnapshots
from clusters.choices import ClusterKind
from clusters.models import Cluster
from core.api.body_limit import BodyLimit
from fabric.api.serializers import FabricFindingSerializer
from fabric.exports import (
    SchedulerTree,
    no_nodes_reason,
    parse_topology_conf,
    safe_switch_name,
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
    kubectl_script,
    kubernetes_node_labels,
    slurm_export_names,
    slurm_node_names,
)

CLUSTER = OpenApiParameter(
    "cluster",
    str,
    description=(
        "the Slurm cluster whose nodes to list, by their Slurm names (default: the one that "
        "binds servers of the fabric; with none, host names, never a Kubernetes node's host)"
    ),
)
DOWNLOAD = OpenApiParameter(
    "download",
    bool,
    description="answer as a file to save (Content-Disposition: attachment), not inline",
)


class PlainTextRenderer(BaseRenderer):
    """text/plain: a text answer as it is; anything else (an error's detail) as indented
    JSON, so an `Accept: text/plain` client reads why too."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type=None, renderer_context=None) -> bytes:
        if data is None:
            return b""
        if isinstance(data, str):
            return data.encode()
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


class YamlRenderer(PlainTextRenderer):
    """application/yaml (and the older text/yaml, application/x-yaml): the YAML text as it
    is, an error's detail as YAML."""

    media_type = "application/yaml"
    format = "yaml"

    def render(self, data: Any, accepted_media_type=None, renderer_context=None) -> bytes:
        if data is None or isinstance(data, str):
            return super().render(data, accepted_media_type, renderer_context)
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()


class TextYamlRenderer(YamlRenderer):
    media_type = "text/yaml"
    format = "text-yaml"


class XYamlRenderer(YamlRenderer):
    media_type = "application/x-yaml"
    format = "x-yaml"


class ErrorsAsJson:
    """An error (4xx) is JSON, as every API error is, to any client that accepts JSON
    (`*/*` does); as text or YAML only to one that accepts nothing else."""

    def finalize_response(self, request: Request, response, *args, **kwargs):
        if isinstance(response, Response) and response.status_code >= 400:
            accept = request.META.get("HTTP_ACCEPT", "")
            ranges = {part.split(";")[0].strip() for part in accept.split(",")}
            if not accept.strip() or ranges & {"*/*", "application/*", "application/json"}:
                request.accepted_renderer = JSONRenderer()
                request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]


def _attached(response: Response, request: Request, filename: str) -> Response:
    """`Content-Disposition`: a file to save with `?download=1` (the page's buttons), else
    inline; both name the file."""
    wanted = request.query_params.get("download", "").lower() in {"1", "true", "yes"}
    response["Content-Disposition"] = (
        f'{"attachment" if wanted else "inline"}; filename="{filename}"'
    )
    return response


def _filename(fabric: str, cluster: str | None, suffix: str) -> str:
    parts = [fabric, cluster] if cluster else [fabric]
    return "-".join(safe_switch_name(part) for part in parts) + suffix


def _invalid(exc: FabricNamesError | FabricFormatError, field: str = "body") -> None:
    raise serializers.ValidationError({getattr(exc, "field", field): [str(exc)]})


def _export(request: Request, name: str):
    fabric = get_object_or_404(Fabric, name=name)
    try:
        who = slurm_export_names(fabric, request.query_params.get("cluster") or None)
    except FabricNamesError as exc:
        _invalid(exc)
    tree, notes = fabric_scheduler_tree(
        fabric, who.names, named_only=who.named_only, skip_servers=who.skip_servers
    )
    when = fabric.applied_at.strftime("%Y-%m-%d %H:%M UTC") if fabric.applied_at else "never"
    cluster = who.cluster
    header = (
        f"Slurm topology/tree of fabric {fabric.name} (snapshot of {when}), by Cluster Atlas\n"
        + (
            f"the nodes of Slurm cluster {cluster}, as it names them"
            if cluster
            else "node names are host names (no Slurm cluster binds these servers)"
        )
        + (
            f"\n{tree.left_out} host(s) on the fabric left out: "
            + (f"not nodes of {cluster}" if cluster else "nodes of another scheduler only")
            if tree.left_out
            else ""
        )
        + f"\ngenerated {timezone.now():%Y-%m-%d %H:%M UTC}"
    )
    return fabric, tree, notes, header, who


class NoNodesSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="why no node can be listed, and what names them")
    unlisted = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text="each switch left out: `switch` and `reason`",
    )


def _no_nodes(fabric: Fabric, tree: SchedulerTree, cluster: str | None) -> Response | None:
    """409 when the tree lists no node: a topology.conf of comments alone (no `Nodes=`)
    would leave slurmctld's topology/tree plugin without a tree, so none is served."""
    if tree.nodes:
        return None
    body = {
        "detail": no_nodes_reason(tree, fabric.name, cluster),
        "unlisted": [{"switch": switch, "reason": why} for switch, why in tree.unlisted],
    }
    return Response(NoNodesSerializer(body).data, status=409)


CONFLICT = {409: NoNodesSerializer}


TEXT_RENDERERS = [PlainTextRenderer, JSONRenderer]
YAML_RENDERERS = [YamlRenderer, TextYamlRenderer, XYamlRenderer, PlainTextRenderer, JSONRenderer]


class FabricTopologyConfView(ErrorsAsJson, APIView):
    """Slurm's topology.conf (tree plugin) for a fabric: the nodes of one Slurm cluster, as
    it names them; 409, saying why, when not one of its nodes can be named (switches left
    out are said in comments). Answers `text/plain` (also to `*/*`); errors as JSON, or as
    text to a client that accepts only text."""

    renderer_classes = TEXT_RENDERERS

    @extend_schema(
        parameters=[CLUSTER, DOWNLOAD],
        responses={(200, "text/plain"): OpenApiTypes.STR, **CONFLICT},
        summary="Slurm topology.conf (topology/tree) of a fabric",
    )
    def get(self, request: Request, name: str) -> Response:
        fabric, tree, notes, header, who = _export(request, name)
        conflict = _no_nodes(fabric, tree, who.cluster)
        if conflict is not None:
            return conflict
        response = Response(
            slurm_topology_conf(tree, notes, header), content_type="text/plain; charset=utf-8"
        )
        return _attached(response, request, _filename(fabric.name, who.cluster, "-topology.conf"))


class FabricTopologyYamlView(ErrorsAsJson, APIView):
    """Slurm 24.11+'s topology.yaml for a fabric: its tree (the cluster default), and a
    block topology of its NVLink domains where its servers share any; whom it lists, and
    409, as topology.conf. Answers `application/yaml` (also `text/yaml`,
    `application/x-yaml`, and `text/plain` or `*/*` as text/plain)."""

    renderer_classes = YAML_RENDERERS

    @extend_schema(
        parameters=[CLUSTER, DOWNLOAD],
        responses={
            (200, "application/yaml"): OpenApiTypes.STR,
            (200, "text/plain"): OpenApiTypes.STR,
            **CONFLICT,
        },
        summary="Slurm topology.yaml (tree) of a fabric",
    )
    def get(self, request: Request, name: str) -> Response:
        fabric, tree, _notes, header, who = _export(request, name)
        conflict = _no_nodes(fabric, tree, who.cluster)
        if conflict is not None:
            return conflict
        blocks = fabric_nvlink_blocks(fabric, who.names)
        media = request.accepted_renderer.media_type
        response = Response(
            slurm_topology_yaml(tree, fabric.name, header, blocks),
            content_type=f"{media}; charset=utf-8",
        )
        return _attached(response, request, _filename(fabric.name, who.cluster, "-topology.yaml"))


class TopologyCompareSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    fabric = serializers.CharField()
    agrees = serializers.BooleanField()
    switches = serializers.IntegerField()
    findings = FabricFindingSerializer(many=True)


class ClusterTopologyView(APIView):
    """POST a Slurm cluster's topology.conf: compared with the discovered fabric."""

    body_limit = BodyLimit("ATLAS_SNAPSHOT_MAX_BYTES")

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
        discovered, _ = fabric_scheduler_tree(
            fabric, names, by_guid={g for g in spelled if g}, named_only=bool(names)
        )
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
    """Suggested Kubernetes node labels for the switch tiers, per node on the fabric: JSON,
    or (`Accept: text/plain`, `?format=txt`) a shell script of the `kubectl label node`
    lines that set them."""

    renderer_classes = [JSONRenderer, PlainTextRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("cluster", str, description="one Kubernetes cluster's nodes only"),
            DOWNLOAD,
        ],
        responses={
            (200, "application/json"): NodeLabelsSerializer(many=True),
            (200, "text/plain"): OpenApiTypes.STR,
        },
        summary="Kubernetes node labels for a fabric's switch tiers (leaf, spine, core)",
    )
    def get(self, request: Request, name: str) -> Response:
        fabric = get_object_or_404(Fabric, name=name)
        cluster = request.query_params.get("cluster") or None
        try:
            nodes = kubernetes_node_labels(fabric, cluster)
        except FabricNamesError as exc:
            _invalid(exc)
        if request.accepted_renderer.format == PlainTextRenderer.format:
            script = kubectl_script(fabric.name, nodes, f"{timezone.now():%Y-%m-%d %H:%M UTC}")
            response = Response(script, content_type="text/plain; charset=utf-8")
            return _attached(response, request, _filename(fabric.name, cluster, "-labels.sh"))
        data = NodeLabelsSerializer(nodes, many=True).data
        return _attached(Response(data), request, _filename(fabric.name, cluster, "-labels.json"))
