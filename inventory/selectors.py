"""Reads of the inventory that span relations, each a fixed number of queries."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from .choices import GpuStatus, ServerState
from .models import ChangeEvent, Disk, Gpu, HardwareProfile, Link, MigDevice, Server


def _count(queryset: QuerySet, outer: str = "server") -> Coalesce:
    counted = (
        queryset.filter(**{outer: OuterRef("pk")})
        .order_by()
        .values(outer)
        .annotate(n=Count("*"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def server_state_expression(now=None) -> Case:
    """SQL for the online/stale/offline rule of `Server.state`, so lists can filter on it."""
    now = now or timezone.now()
    return Case(
        When(last_seen__isnull=True, then=Value(ServerState.NEVER)),
        When(
            last_seen__gte=now - timedelta(seconds=settings.ATLAS_SERVER_STALE_AFTER_S),
            then=Value(ServerState.ONLINE),
        ),
        When(
            last_seen__gte=now - timedelta(seconds=settings.ATLAS_SERVER_OFFLINE_AFTER_S),
            then=Value(ServerState.STALE),
        ),
        default=Value(ServerState.OFFLINE),
        output_field=CharField(),
    )


def server_list() -> QuerySet[Server]:
    """Servers with state, GPU count (lost GPUs excluded), MIG device count and MIG flag."""
    live_gpus = Gpu.objects.exclude(status=GpuStatus.LOST)
    return Server.objects.select_related("physical_host").annotate(
        state_value=server_state_expression(),
        gpu_count=_count(live_gpus),
        lost_gpu_count=_count(Gpu.objects.filter(status=GpuStatus.LOST)),
        mig_device_count=_count(MigDevice.objects.all(), "gpu__server"),
        mig_enabled=Exists(live_gpus.filter(server=OuterRef("pk"), mig_mode_current=True)),
    )


def server_detail() -> QuerySet[Server]:
    """One server with everything its page and API show, prefetched."""
    return server_list().prefetch_related(
        Prefetch("gpus", queryset=Gpu.objects.prefetch_related("mig_devices").order_by("index")),
        "nics",
        "disks",
        "guests",
        "virtual_machines",
        Prefetch(
            "links",
            queryset=Link.objects.select_related("gpu_a", "gpu_b", "nic"),
        ),
        Prefetch(
            "changes",
            queryset=ChangeEvent.objects.select_related("gpu").order_by("-created_at", "-id")[:100],
            to_attr="recent_changes",
        ),
    )


def gpu_list() -> QuerySet[Gpu]:
    return Gpu.objects.select_related("server").annotate(
        mig_device_count=_count(MigDevice.objects.all(), "gpu")
    )


def disk_list() -> QuerySet[Disk]:
    return Disk.objects.select_related("server")


def mig_device_list() -> QuerySet[MigDevice]:
    return MigDevice.objects.select_related("gpu", "gpu__server")


def fleet_summary() -> dict:
    """Counts of the physical layers for the overview, in a handful of aggregate queries."""
    servers = server_list()
    by_state = dict(
        Server.objects.annotate(state_value=server_state_expression())
        .order_by()
        .values_list("state_value")
        .annotate(n=Count("id"))
    )
    live = Gpu.objects.exclude(status=GpuStatus.LOST)
    gpus_by_model = list(
        live.order_by()
        .values("name")
        .annotate(n=Count("id"), mig=Count("id", filter=Q(mig_mode_current=True)))
        .order_by("-n", "name")
    )
    mig_by_profile = list(
        MigDevice.objects.order_by()
        .values("profile")
        .annotate(n=Count("id"))
        .order_by("-n", "profile")
    )
    gpu_total = sum(row["n"] for row in gpus_by_model)
    mig_gpus = sum(row["mig"] for row in gpus_by_model)
    return {
        "servers": sum(by_state.values()),
        "servers_by_state": {state: by_state.get(state, 0) for state in ServerState.values},
        "virtual_servers": Server.objects.filter(is_virtual=True).count(),
        "gpus": gpu_total,
        "lost_gpus": Gpu.objects.filter(status=GpuStatus.LOST).count(),
        "gpus_by_model": gpus_by_model,
        "mig_gpus": mig_gpus,
        "mig_devices": sum(row["n"] for row in mig_by_profile),
        "mig_by_profile": mig_by_profile,
        "stale_servers": list(
            servers.filter(state_value__in=[ServerState.STALE, ServerState.OFFLINE]).order_by(
                "last_seen"
            )[:10]
        ),
    }


def recent_changes(limit: int = 10) -> QuerySet[ChangeEvent]:
    return ChangeEvent.objects.select_related("server", "gpu").order_by("-created_at", "-id")[
        :limit
    ]


def hardware_profile_for(
    *, vendor: str, product: str, profile_id: int | None, profiles: list[HardwareProfile]
) -> HardwareProfile | None:
    """The profile set on a server, else the first whose vendor and product match its DMI."""
    for profile in profiles:
        if profile.pk == profile_id:
            return profile
    for profile in profiles:
        if not (profile.vendor or profile.product):
            continue
        if profile.vendor and profile.vendor.lower() != (vendor or "").lower():
            continue
        if profile.product and profile.product.lower() != (product or "").lower():
            continue
        return profile
    return None


def gpu_model_names() -> list[str]:
    """The GPU models present (lost GPUs left out), for a filter's dropdown."""
    names = (
        Gpu.objects.exclude(status=GpuStatus.LOST)
        .exclude(name="")
        .order_by("name")
        .values_list("name", flat=True)
        .distinct()
    )
    return list(names)


def rack_names() -> list[str]:
    """The racks servers stand in, for a filter's dropdown."""
    racks = Server.objects.exclude(rack="").order_by("rack").values_list("rack", flat=True)
    return list(racks.distinct())


def unhealthy_gpu_count() -> int:
    return Gpu.objects.unhealthy().count()
