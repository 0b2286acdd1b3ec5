"""django-filter sets of the inventory API and pages."""

from __future__ import annotations

import django_filters
from django.db.models import Exists, OuterRef, Q, QuerySet

from core.filters import IdFilter

from .choices import GpuStatus, ServerState
from .models import Disk, Gpu, GpuQuerySet, MigDevice, Server
from .selectors import (
    SERVER_HEALTH_CHOICES,
    gpu_search_q,
    server_health_expression,
    server_search_q,
)


class ServerFilter(django_filters.FilterSet):
    search = django_filters.CharFilter(
        method="filter_search",
        help_text=(
            "hostname, FQDN, serial, address, GPU serial/UUID/PCI address/model, MIG UUID or "
            "profile, node name, rack, cluster, or a state"
        ),
    )
    hostname = django_filters.CharFilter(field_name="hostname", lookup_expr="icontains")
    model = django_filters.CharFilter(method="filter_model", help_text="GPU model (substring)")
    state = django_filters.ChoiceFilter(field_name="state_value", choices=ServerState.choices)
    health = django_filters.ChoiceFilter(
        choices=SERVER_HEALTH_CHOICES,
        method="filter_health",
        help_text="the worst severity among the server's open findings (ok: none open)",
    )
    mig = django_filters.BooleanFilter(field_name="mig_enabled", help_text="has a MIG-enabled GPU")
    rack = django_filters.CharFilter(field_name="rack")
    cluster = django_filters.CharFilter(method="filter_cluster", help_text="bound to a node of it")
    is_virtual = django_filters.BooleanFilter()
    has_gpus = django_filters.BooleanFilter(method="filter_has_gpus")

    class Meta:
        model = Server
        fields = [
            "search",
            "hostname",
            "model",
            "state",
            "health",
            "mig",
            "rack",
            "cluster",
            "is_virtual",
        ]

    def filter_model(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        gpus = Gpu.objects.filter(server=OuterRef("pk"), name__icontains=value).exclude(
            status=GpuStatus.LOST
        )
        return queryset.filter(Exists(gpus))

    def filter_has_gpus(self, queryset: QuerySet, name: str, value: bool) -> QuerySet:
        return queryset.filter(gpu_count__gt=0) if value else queryset.filter(gpu_count=0)

    def filter_cluster(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(_cluster_q(value, exact=True))

    def filter_health(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.alias(_health=server_health_expression()).filter(_health=value)

    def filter_search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(server_search_q(value)) if value.strip() else queryset


def _cluster_q(value: str, *, exact: bool) -> Q:
    """Servers bound to a scheduler node of that cluster (an EXISTS: one row per server).

    The node tables belong to the clusters app, a layer above; the lookup goes through the
    reverse relation by name, so this layer imports nothing from it.
    """
    lookup = "nodes__cluster__name" if exact else "nodes__cluster__name__iexact"
    return Q(Exists(Server.objects.filter(pk=OuterRef("pk"), **{lookup: value})))


GPU_HEALTH_CHOICES = (("healthy", "Healthy"), ("unhealthy", "Unhealthy"))


class GpuFilter(django_filters.FilterSet):
    search = django_filters.CharFilter(method="filter_search")
    server = IdFilter(field_name="server_id")
    model = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    mig_enabled = django_filters.BooleanFilter(field_name="mig_mode_current")
    status = django_filters.ChoiceFilter(choices=GpuStatus.choices)
    health = django_filters.ChoiceFilter(
        choices=GPU_HEALTH_CHOICES,
        method="filter_health",
        help_text="unhealthy: lost, failing NVML, row remap failed or pending, uncorrected ECC",
    )
    uuid = django_filters.CharFilter(field_name="uuid", lookup_expr="iexact")
    serial = django_filters.CharFilter(field_name="serial")
    fabric_cluster_uuid = django_filters.CharFilter(
        field_name="fabric_cluster_uuid",
        lookup_expr="iexact",
        help_text="the GPUs of one multi-node NVLink fabric (a GB200 NVL72 rack)",
    )

    class Meta:
        model = Gpu
        fields = [
            "search",
            "server",
            "model",
            "mig_enabled",
            "status",
            "health",
            "uuid",
            "serial",
            "fabric_cluster_uuid",
        ]

    def filter_health(self, queryset: GpuQuerySet, name: str, value: str) -> GpuQuerySet:
        return queryset.healthy() if value == "healthy" else queryset.unhealthy()

    def filter_search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(gpu_search_q(value)) if value.strip() else queryset


class DiskFilter(django_filters.FilterSet):
    server = IdFilter(field_name="server_id")
    transport = django_filters.CharFilter(field_name="transport", lookup_expr="iexact")
    serial = django_filters.CharFilter(field_name="serial")

    class Meta:
        model = Disk
        fields = ["server", "transport", "serial"]


class MigDeviceFilter(django_filters.FilterSet):
    server = IdFilter(field_name="gpu__server_id")
    gpu = IdFilter(field_name="gpu_id")
    profile = django_filters.CharFilter(field_name="profile", lookup_expr="iexact")

    class Meta:
        model = MigDevice
        fields = ["server", "gpu", "profile"]
