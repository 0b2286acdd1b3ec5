"""django-filter sets of the health API."""

from __future__ import annotations

import django_filters

from core.filters import IdFilter, UtcDateTimeFilter, WholeNumberFilter

from .choices import EventKind, Severity
from .models import HealthEvent


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
