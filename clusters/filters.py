"""django-filter sets of the scheduler API and pages."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from core.filters import IdFilter

from .choices import ClusterKind, FindingType, Severity
from .models import Finding, Node


class NodeFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    kind = django_filters.ChoiceFilter(choices=ClusterKind.choices)
    server = IdFilter(field_name="server_id")
    state = django_filters.CharFilter(field_name="state", lookup_expr="iexact")
    bound = django_filters.BooleanFilter(field_name="server", lookup_expr="isnull", exclude=True)
    search = django_filters.CharFilter(method="filter_search")
    partition = django_filters.CharFilter(method="filter_partition")

    class Meta:
        model = Node
        fields = ["cluster", "kind", "server", "state", "bound", "search", "partition"]

    def filter_search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(name__icontains=value) | queryset.filter(
            server__hostname__icontains=value
        )

    def filter_partition(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        # JSON list membership without JSON operators, portable to SQLite and PostgreSQL.
        return queryset.filter(partitions__icontains=f'"{value}"')


class FindingFilter(django_filters.FilterSet):
    type = django_filters.ChoiceFilter(choices=FindingType.choices)
    severity = django_filters.ChoiceFilter(choices=Severity.choices)
    cluster = django_filters.CharFilter(method="filter_cluster")
    open = django_filters.BooleanFilter(field_name="resolved_at", lookup_expr="isnull")
    server = IdFilter(field_name="server_id")
    node = IdFilter(field_name="node_id")

    class Meta:
        model = Finding
        fields = ["type", "severity", "cluster", "open", "server", "node"]

    def filter_cluster(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(cluster__name=value)
