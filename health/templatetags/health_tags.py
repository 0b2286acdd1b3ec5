"""Health tags: an event's code with the catalog's meaning on hover; a server's events."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from health.catalog import event_info
from health.selectors import code_label, health_event_list

register = template.Library()


@register.simple_tag
def event_code(kind: str, code: int | None, message: str = "") -> SafeString:
    info = event_info(kind, code, message)
    return format_html(
        '<abbr class="event-code" title="{}">{}</abbr>', info.meaning, code_label(kind, code)
    )


@register.simple_tag
def server_events(server_id: int, limit: int = 50) -> list[Any]:
    """The server's newest health events (one query), for the server page's Events card."""
    return list(
        health_event_list().filter(server_id=server_id).order_by("-last_seen", "-id")[:limit]
    )
