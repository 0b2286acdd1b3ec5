"""Reads of the topology app: the rows feeding the fleet figures, and its own stored figures.

The fleet rows cost five queries whatever the fleet size (servers, GPU counts per server and
model, MIG counts per server, model and profile, active nodes, open finding severities per
server), all through `.values()` so 25,000 servers never build 25,000 model instances. The
rows' shapes are `topology.figures.FleetRows`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from django.db.models import Count, F, Q

from clusters.models import Node
from findings.facts import SEVERITY_ORDER
from findings.models import Finding
from inventory.choices import GpuStatus
from inventory.models import Gpu, MigDevice, Server
from inventory.selectors import server_state_expression

from .figures import FleetRows, GpuCountRow, MigCountRow, NodeRow, ServerRow
from .models import RenderedFigure


def server_health() -> dict[int, str]:
    """Each server's worst open finding severity (servers without one are absent)."""
    severities: dict[int, set[str]] = {}
    for server_id, severity in (
        Finding.objects.filter(resolved_at__isnull=True, server__isnull=False)
        .order_by()
        .values_list("server_id", "severity")
        .distinct()
    ):
        severities.setdefault(server_id, set()).add(severity)
    return {
        sid: next((s for s in SEVERITY_ORDER if s in found), "info")
        for sid, found in severities.items()
    }


def fleet_rows() -> FleetRows:
    """Everything the fleet figures draw, as plain rows; lost GPUs and gone nodes left out."""
    health = server_health()
    servers: list[ServerRow] = [
        {
            "id": row["id"],
            "hostname": row["hostname"],
            "model": row["product"] or row["vendor"],
            "rack": row["rack"],
            "rack_position": row["rack_position"],
            "is_virtual": row["is_virtual"],
            "physical_host_id": row["physical_host_id"],
            "state": row["state_value"],
            "health": health.get(row["id"], ""),
        }
        for row in Server.objects.order_by("id")
        .annotate(state_value=server_state_expression())
        .values(
            "id",
            "hostname",
            "vendor",
            "product",
            "rack",
            "rack_position",
            "is_virtual",
            "physical_host_id",
            "state_value",
        )
    ]
    gpus: list[GpuCountRow] = [
        {
            "server_id": row["server_id"],
            "model": row["name"],
            "count": row["count"],
            "mig_count": row["mig_count"],
        }
        for row in Gpu.objects.exclude(status=GpuStatus.LOST)
        .order_by()
        .values("server_id", "name")
        .annotate(count=Count("id"), mig_count=Count("id", filter=Q(mig_mode_current=True)))
        .order_by("server_id", "name")
    ]
    mig_devices: list[MigCountRow] = [
        {
            "server_id": row["server_id"],
            "model": row["model"],
            "profile": row["profile"],
            "count": row["count"],
        }
        for row in MigDevice.objects.exclude(gpu__status=GpuStatus.LOST)
        .order_by()
        .values("profile", server_id=F("gpu__server_id"), model=F("gpu__name"))
        .annotate(count=Count("id"))
        .order_by("server_id", "model", "profile")
    ]
    nodes: list[NodeRow] = [
        {
            "id": row["id"],
            "name": row["name"],
            "cluster": row["cluster_name"],
            "kind": row["kind"],
            "server_id": row["server_id"],
            "binding_method": row["binding_method"],
            "gpu_capacity": row["gpu_capacity"],
        }
        for row in Node.objects.filter(gone_at__isnull=True)
        .order_by("cluster__name", "name")
        .values(
            "id",
            "name",
            "kind",
            "server_id",
            "binding_method",
            "gpu_capacity",
            cluster_name=F("cluster__name"),
        )
    ]
    return {"servers": servers, "gpus": gpus, "mig_devices": mig_devices, "nodes": nodes}


class RenderedFigureRow(TypedDict):
    name: str
    revision: str
    rendered_at: datetime
    duration_ms: int


def rendered_figure_index() -> dict[str, RenderedFigureRow]:
    """Each rendered fleet figure's name, revision, render time and duration, without the
    figure itself (large): one query."""
    rows = RenderedFigure.objects.values("name", "revision", "rendered_at", "duration_ms")
    return {row["name"]: row for row in rows}
