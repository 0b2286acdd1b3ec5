"""django-filter sets of the fabric API."""

from __future__ import annotations

import django_filters
from django.db.models import Q, QuerySet

from core.filters import IdFilter, WholeNumberFilter

from .choices import AdapterRole, LinkState, SnapshotStatus
from .models import Adapter, FabricLink, FabricSnapshot, Switch
from .selectors.search import switch_search_q


class SwitchFilter(django_filters.FilterSet):
    fabric = django_filters.CharFilter(field_name="fabric__name")
    tier = WholeNumberFilter(method="filter_tier")
    rail = WholeNumberFilter(field_name="rail")
    search = django_filters.CharFilter(method="filter_search")

    class Meta:
        model = Switch
        fields = ["fabric", "tier", "rail", "search"]

    def filter_tier(self, queryset: QuerySet, name: str, value) -> QuerySet:
        return queryset.filter(
            Q(tier_override=value) | Q(tier_override__isnull=True, tier_inferred=value)
        )

    def filter_search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(switch_search_q(value))  # as the global search finds them


class AdapterFilter(django_filters.FilterSet):
    fabric = django_filters.CharFilter(field_name="fabric__name")
    server = IdFilter(field_name="server_id")
    bound = django_filters.BooleanFilter(field_name="server", lookup_expr="isnull", exclude=True)
    role = django_filters.ChoiceFilter(choices=AdapterRole.choices)
    rail = WholeNumberFilter(field_name="rail")
    search = django_filters.CharFilter(method="filter_search")

    class Meta:
        model = Adapter
        fields = ["fabric", "server", "bound", "role", "rail", "search"]

    def filter_search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(
            Q(host_name__icontains=value)
            | Q(description__icontains=value)
            | Q(guid__icontains=value)
        )


class FabricLinkFilter(django_filters.FilterSet):
    fabric = django_filters.CharFilter(field_name="fabric__name")
    state = django_filters.ChoiceFilter(choices=LinkState.choices)
    switch = IdFilter(method="filter_switch")
    server = IdFilter(method="filter_server")
    speed = django_filters.CharFilter(method="filter_speed")

    class Meta:
        model = FabricLink
        fields = ["fabric", "state", "switch", "server", "speed"]

    def filter_switch(self, queryset: QuerySet, name: str, value) -> QuerySet:
        return queryset.filter(Q(a_switch_id=value) | Q(b_switch_id=value))

    def filter_server(self, queryset: QuerySet, name: str, value) -> QuerySet:
        return queryset.filter(Q(a_adapter__server_id=value) | Q(b_adapter__server_id=value))

    def filter_speed(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        """`4xNDR`, or a lane speed alone (`HDR`)."""
        width, sep, speed = value.partition("x")
        if sep and width.isdigit():
            return queryset.filter(width=f"{width}x", lane_speed=speed.upper())
        return queryset.filter(lane_speed=value.upper())


class FabricSnapshotFilter(django_filters.FilterSet):
    fabric = django_filters.CharFilter(field_name="fabric__name")
    status = django_filters.ChoiceFilter(choices=SnapshotStatus.choices)

    class Meta:
        model = FabricSnapshot
        fields = ["fabric", "status"]
