"""Finding a fabric switch by what people type: its name, its description, its node or
system GUID (`0x248a0703005d8e10`, `248a:0703:005d:8e10` or a part of one). The global search
(`topology.search`) and the switch list's `?search=` share this rule."""

from __future__ import annotations

from django.db.models import Q

from ..models import Switch


def guid_text(value: str) -> str:
    """A GUID as the fabric stores it: lower-case hex, no `0x`, no colons."""
    value = value.strip().lower()
    return value.removeprefix("0x").replace(":", "")


def switch_search_q(value: str) -> Q:
    """Switches whose name or description contains `value`, or whose GUID (or system GUID)
    contains it, when it reads as a GUID (four hex digits or more)."""
    value = value.strip()
    q = Q(name__icontains=value) | Q(description__icontains=value)
    guid = guid_text(value)
    if len(guid) >= 4 and all(c in "0123456789abcdef" for c in guid):
        q |= Q(guid__icontains=guid) | Q(system_guid__icontains=guid)
    return q


def switch_search(value: str, *, limit: int) -> tuple[list[Switch], int]:
    """The first `limit` live switches `switch_search_q` matches, by fabric and name, and how
    many match (two queries)."""
    found = (
        Switch.objects.filter(gone_at__isnull=True)
        .filter(switch_search_q(value))
        .select_related("fabric")
        .only(
            "id",
            "name",
            "guid",
            "description",
            "rail",
            "tier_override",
            "tier_inferred",
            "fabric__name",
        )
        .order_by("fabric__name", "name", "guid", "pk")
    )
    return list(found[:limit]), found.count()
