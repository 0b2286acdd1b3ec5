"""Reads of the inventory that span relations, each a fixed number of queries."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, TypedDict

from django.apps import apps
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
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from core.db.distinct import distinct_values
from core.palette import CRITICAL, INFO, OK, WARNING

from .choices import GpuStatus, ServerState
from .health import problem_q
from .models import (
    ChangeEvent,
    Disk,
    Enrollment,
    EnrollmentToken,
    Gpu,
    HardwareProfile,
    Link,
    MigDevice,
    Nic,
    Server,
)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


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


SERVER_HEALTH_CHOICES = tuple((h, h) for h in (OK, INFO, WARNING, CRITICAL))


_WORST_FIRST = (CRITICAL, WARNING, INFO)
"""The tones a server's open findings give it, worst first: a finding's severity is its tone."""


def _open_finding_of(severity: str) -> Exists:
    # Findings belong to the findings app, a layer above: reached by the reverse relation's
    # name, so this layer imports nothing from it.
    return Exists(
        Server.objects.filter(
            pk=OuterRef("pk"),
            findings__resolved_at__isnull=True,
            findings__severity=severity,
        )
    )


def server_health_expression() -> Case:
    """SQL for a server's health: the worst severity among its open findings, else `ok`."""
    return Case(
        *(When(_open_finding_of(s), then=Value(s)) for s in _WORST_FIRST),
        default=Value(OK),
        output_field=CharField(),
    )


def lost_gpu_count_expression() -> Greatest:
    """SQL for the GPUs a server has lost: its rows marked lost (`inventory.health`'s `lost`),
    or, when more, the GPUs on its PCI bus beyond those NVML shows (fallen off the bus before
    NVML ever listed them, so no row of theirs exists)."""
    lost_rows = _count(Gpu.objects.filter(problem_q("lost")))
    live = _count(Gpu.objects.exclude(problem_q("lost")))
    off_nvml = Coalesce("pci_gpu_count", 0) - live
    return Greatest(lost_rows, off_nvml, Value(0))


class ServerListAnnotations(TypedDict):
    """What `server_list` annotates each server with (its columns, filters and sorts)."""

    state_value: str
    health: str
    gpu_count: int
    lost_gpu_count: int
    mig_device_count: int
    mig_enabled: bool


def server_list() -> QuerySet[WithAnnotations[Server, ServerListAnnotations]]:
    """Servers with state, health (worst open finding), GPU count (lost GPUs excluded), lost
    GPU count, MIG device count and MIG flag; their nodes prefetched (one query)."""
    live_gpus = Gpu.objects.exclude(status=GpuStatus.LOST)
    return (
        Server.objects.select_related("physical_host")
        .prefetch_related("nodes__cluster")
        .annotate(
            state_value=server_state_expression(),
            health=server_health_expression(),
            gpu_count=_count(live_gpus),
            lost_gpu_count=lost_gpu_count_expression(),
            mig_device_count=_count(MigDevice.objects.all(), "gpu__server"),
            mig_enabled=Exists(live_gpus.filter(server=OuterRef("pk"), mig_mode_current=True)),
        )
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
            queryset=Link.objects.select_related("gpu_a", "gpu_b", "nic", "nic_a", "nic_b"),
        ),
        Prefetch(
            "changes",
            queryset=ChangeEvent.objects.select_related("gpu").order_by("-created_at", "-id")[:100],
            to_attr="recent_changes",
        ),
    )


def server_gpus(server_id: int) -> QuerySet[Gpu]:
    """One server's GPUs, lost ones included, by index (one query): a node page's GPU rows."""
    return Gpu.objects.filter(server_id=server_id).order_by("index", "pci_bus_id")


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
        "lost_gpus": Server.objects.annotate(lost=lost_gpu_count_expression()).aggregate(
            n=Coalesce(Sum("lost"), 0)
        )["n"],
        "online_by_health": online_by_health(),
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


def online_by_health() -> dict[str, int]:
    """Online servers counted by health, so "online 18" never paints a critical server green."""
    rows = (
        Server.objects.annotate(state_value=server_state_expression())
        .filter(state_value=ServerState.ONLINE)
        .annotate(health=server_health_expression())
        .order_by()
        .values_list("health")
        .annotate(n=Count("id"))
    )
    return dict(rows)


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
    present = Gpu.objects.exclude(status=GpuStatus.LOST).exclude(name="")
    return distinct_values(present, "name")  # a walk of gpu_present_name (core/db/distinct.py)


def rack_names() -> list[str]:
    """The racks servers stand in, for a filter's dropdown."""
    racks = Server.objects.exclude(rack="").order_by("rack").values_list("rack", flat=True)
    return list(racks.distinct())


def bound_cluster_names() -> list[str]:
    """The clusters servers are bound to, for a filter's dropdown (the models looked up by
    name: the clusters app is a layer above, never imported)."""
    node = apps.get_model("clusters", "Node")
    cluster = apps.get_model("clusters", "Cluster")
    # One probe of the bound nodes' index per cluster, not a join of every bound node.
    bound = node._default_manager.filter(cluster=OuterRef("pk"), server__isnull=False)
    names = cluster._default_manager.filter(Exists(bound)).order_by("name")
    return list(names.values_list("name", flat=True))


# Searchable fields, one definition per model: the lists' `?search=` (pages and API) and the
# global search (topology.search) match the same rows. Relations are matched with EXISTS, never
# joins, so a server matching through two GPUs is still one row.


def server_search_q(value: str) -> Q:
    """Servers whose hostname, FQDN, serial or an address (a NIC IP) contains `value`, or whose
    GPU (serial, UUID, PCI address, model), MIG device (UUID, profile) or scheduler node (name,
    address) matches; a rack, a cluster or a state word by its exact name."""
    value = value.strip()
    lowered = value.lower()
    q = (
        Q(hostname__icontains=value)
        | Q(fqdn__icontains=value)
        | Q(serial__iexact=value)
        | Q(rack__iexact=value)
        | Q(addresses__icontains=value)
        | Q(Exists(Gpu.objects.filter(server=OuterRef("pk")).filter(gpu_search_q(value, own=True))))
        | Q(Exists(MigDevice.objects.filter(gpu__server=OuterRef("pk"), uuid__icontains=value)))
        | Q(Exists(MigDevice.objects.filter(gpu__server=OuterRef("pk"), profile__iexact=value)))
        # The node tables belong to the clusters app, a layer above: reached by the reverse
        # relation's name.
        | Q(Exists(Server.objects.filter(pk=OuterRef("pk"), nodes__name__iexact=value)))
        | Q(Exists(Server.objects.filter(pk=OuterRef("pk"), nodes__cluster__name__iexact=value)))
    )
    if lowered in ServerState.values:
        q |= Q(state_value=lowered)
    if lowered == "mig":
        q |= Q(mig_enabled=True)
    return q


def gpu_search_q(value: str, *, own: bool = False) -> Q:
    """GPUs whose UUID, serial, PCI address or model contains `value`, or one of whose MIG
    devices has that UUID; with its server's hostname unless `own` (the GPU's own fields)."""
    value = value.strip()
    q = (
        Q(uuid__icontains=value)
        | Q(serial__iexact=value)
        | Q(pci_bus_id__icontains=value)
        | Q(name__icontains=value)
        | Q(Exists(MigDevice.objects.filter(gpu=OuterRef("pk"), uuid__icontains=value)))
    )
    return q if own else q | Q(server__hostname__icontains=value)


def mig_device_search_q(value: str) -> Q:
    """MIG devices whose UUID contains `value`."""
    return Q(uuid__icontains=value.strip())


def server_search(value: str, *, limit: int) -> tuple[list[Server], int]:
    """The first `limit` servers `server_search_q` matches, by hostname, and how many match."""
    found = server_list().filter(server_search_q(value)).order_by("hostname", "pk")
    return list(found[:limit]), found.count()


def gpu_search(value: str, *, limit: int) -> tuple[list[Gpu], int]:
    """The first `limit` GPUs matching by their own fields (not their server's name: the
    server itself is a result), and how many match."""
    found = (
        Gpu.objects.select_related("server")
        .filter(gpu_search_q(value, own=True))
        .order_by("server__hostname", "index", "pk")
    )
    return list(found[:limit]), found.count()


def mig_device_search(value: str, *, limit: int) -> tuple[list[MigDevice], int]:
    found = mig_device_list().filter(mig_device_search_q(value)).order_by("uuid", "pk")
    return list(found[:limit]), found.count()


def nic_search_q(value: str) -> Q:
    """NICs whose MAC or InfiniBand GUID (node GUID, a port's GUID; `0x` and colons as people
    type them) contains `value`, or whose name or netdev is `value`; `host nic` (`dgx-07
    mlx5_0`) names one server's NIC. A bare name such as `mlx5_0` finds that NIC on every
    server."""
    value = value.strip()
    lowered = value.lower()
    q = Q(name__iexact=value) | Q(netdev__iexact=value)
    mac = lowered.replace("-", ":")
    if len(mac) >= 2:
        q |= Q(mac__icontains=mac)
    guid = lowered.removeprefix("0x").replace(":", "")
    if len(guid) >= 4 and all(c in "0123456789abcdef" for c in guid):
        q |= (
            Q(node_guid__icontains=guid)
            | Q(port_guid__icontains=guid)
            | Q(port_guids__icontains=guid)
        )
    host, _, nic = value.partition(" ")
    if nic.strip():
        q |= Q(server__hostname__iexact=host) & (
            Q(name__iexact=nic.strip()) | Q(netdev__iexact=nic.strip())
        )
    return q


def nic_search(value: str, *, limit: int) -> tuple[list[Nic], int]:
    """The first `limit` NICs `nic_search_q` matches, by server and name, with their server,
    and how many match (two queries)."""
    found = (
        Nic.objects.select_related("server")
        .filter(nic_search_q(value))
        .only(
            "id",
            "name",
            "netdev",
            "kind",
            "mac",
            "node_guid",
            "port_guid",
            "speed_mbps",
            "server__id",
            "server__hostname",
        )
        .order_by("server__hostname", "name", "pk")
    )
    return list(found[:limit]), found.count()


def enrollment_token_list() -> QuerySet[EnrollmentToken]:
    """Enrollment tokens with who made them and their enrollments: three queries a page."""
    return EnrollmentToken.objects.select_related("created_by").prefetch_related(
        Prefetch("enrollments", queryset=Enrollment.objects.order_by("-enrolled_at", "-id"))
    )
