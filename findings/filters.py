"""The findings FilterSet, shared by the API (`/api/v1/findings/`) and the findings page: its
`type` choices are every family's types (`choices.FindingType`)."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from core.filters import IdFilter

from .choices import FindingType, Severity
from .models import Finding


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
