"""django-filter sets of the scheduler API and pages."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from core.filters import IdFilter

from .choices import ClusterKind
from .models import Node
from .selectors import node_search_q, node_state_q


class NodeFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    kind = django_filters.ChoiceFilter(choices=ClusterKind.choices)
    server = IdFilter(field_name="server_id")
    state = django_filters.CharFilter(
        method="filter_state", help_text="a state (idle, ready) or a flag (drain)"
    )
    bound = django_filters.BooleanFilter(field_name="server", lookup_expr="isnull", exclude=True)
    search = django_filters.CharFilter(method="filter_search")
    partition = django_filters.CharFilter(method="filter_partition")

    class Meta:
        model = Node
        fields = ["cluster", "kind", "server", "state", "bound", "search", "partition"]

    def filter_search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(node_search_q(value)) if value.strip() else queryset

    def filter_state(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(node_state_q(value)) if value.strip() else queryset

    def filter_partition(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        # JSON list membership without JSON operators, portable to SQLite and PostgreSQL.
        return queryset.filter(partitions__icontains=f'"{value}"')
