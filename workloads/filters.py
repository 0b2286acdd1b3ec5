"""django-filter set of the workloads API and list page (one set, so both filter alike).

Filters on allocations (`node`, `server`, `gpu`) match a workload that held it at any time
(history too) and never duplicate a workload (an EXISTS, not a join); `held=true` keeps the
workloads that hold a GPU now.
"""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from core.filters import IdFilter

from .choices import Verdict, WorkloadKind, WorkloadState
from .models import Workload
from .selectors import allocation_exists


class WorkloadFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    kind = django_filters.ChoiceFilter(choices=WorkloadKind.choices)
    state = django_filters.ChoiceFilter(choices=WorkloadState.choices)
    user = django_filters.CharFilter(field_name="user")
    account = django_filters.CharFilter(
        field_name="account", help_text="the Slurm account or the Kubernetes namespace"
    )
    node = django_filters.CharFilter(method="filter_node", help_text="a scheduler node's name")
    server = IdFilter(method="filter_server", help_text="a server's id")
    gpu = IdFilter(method="filter_gpu", help_text="a GPU's id")
    verdict = django_filters.ChoiceFilter(choices=Verdict.choices)
    gpu_model = django_filters.CharFilter(
        method="filter_gpu_model", help_text="a GPU model it runs on, exactly as reported"
    )
    held = django_filters.BooleanFilter(
        method="filter_held", help_text="true: holds GPUs now; false: holds none"
    )

    class Meta:
        model = Workload
        fields = [
            "cluster",
            "kind",
            "state",
            "user",
            "account",
            "node",
            "server",
            "gpu",
            "verdict",
            "gpu_model",
            "held",
        ]

    def filter_node(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(allocation_exists(node_name=value)) if value else queryset

    def filter_server(self, queryset: QuerySet, name: str, value: int | None) -> QuerySet:
        return queryset.filter(allocation_exists(server_id=value)) if value else queryset

    def filter_gpu(self, queryset: QuerySet, name: str, value: int | None) -> QuerySet:
        return queryset.filter(allocation_exists(gpu_id=value)) if value else queryset

    def filter_gpu_model(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        # JSON list membership without JSON operators, portable to SQLite and PostgreSQL
        # (as clusters' `partition` filter does).
        return queryset.filter(gpu_models__icontains=f'"{value}"') if value else queryset

    def filter_held(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        held = allocation_exists(until__isnull=True)
        return queryset.filter(held) if value else queryset.exclude(held)
