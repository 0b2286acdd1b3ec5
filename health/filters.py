"""django-filter sets of the health API."""

from __future__ import annotations

import django_filters

from .choices import EventKind, Severity
from .models import HealthEvent


class HealthEventFilter(django_filters.FilterSet):
    server = django_filters.NumberFilter(field_name="server_id")
    gpu = django_filters.NumberFilter(field_name="gpu_id")
    code = django_filters.NumberFilter(field_name="code", min_value=0)
    kind = django_filters.ChoiceFilter(choices=EventKind.choices)
    severity = django_filters.ChoiceFilter(choices=Severity.choices)
    since = django_filters.IsoDateTimeFilter(
        field_name="last_seen", lookup_expr="gte", help_text="seen at or after (ISO 8601)"
    )
    serial = django_filters.CharFilter(field_name="gpu_serial")

    class Meta:
        model = HealthEvent
        fields = ["server", "gpu", "code", "kind", "severity", "since", "serial"]
