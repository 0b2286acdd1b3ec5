"""django-filter sets of the health API, and the GPUs page's (the inventory's GPU filters and
whether a GPU needs action, `health.action`)."""

from __future__ import annotations

import django_filters

from core.filters import IdFilter, UtcDateTimeFilter, WholeNumberFilter
from inventory.filters import GpuFilter

from .choices import EventKind, Severity
from .models import HealthEvent
from .selectors import action_filter


class HealthEventFilter(django_filters.FilterSet):
    server = IdFilter(field_name="server_id")
    gpu = IdFilter(field_name="gpu_id")
    code = WholeNumberFilter(field_name="code")
    kind = django_filters.ChoiceFilter(choices=EventKind.choices)
    severity = django_filters.ChoiceFilter(choices=Severity.choices)
    since = UtcDateTimeFilter(
        field_name="last_seen", lookup_expr="gte", help_text="seen at or after (ISO 8601)"
    )
    serial = django_filters.CharFilter(field_name="gpu_serial")

    class Meta:
        model = HealthEvent
        fields = ["server", "gpu", "code", "kind", "severity", "since", "serial"]


ACTION_CHOICES = (("needed", "needs action"), ("none", "needs none"))


class GpuActionFilter(GpuFilter):
    """The GPUs page's filters: the inventory's, and `action` (needed or none)."""

    action = django_filters.ChoiceFilter(
        choices=ACTION_CHOICES,
        method="filter_action",
        help_text="needed: lost, failing NVML, an open health finding, or a critical finding "
        "on its server",
    )

    class Meta(GpuFilter.Meta):
        fields = [*GpuFilter.Meta.fields, "action"]

    def filter_action(self, queryset, name, value):
        return action_filter(queryset, needed=value == "needed")
