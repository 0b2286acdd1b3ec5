"""The switch list, declared once for the page and its CSV export (core.tables)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.db.models.functions import Coalesce
from django.urls import reverse

from core.forms import FilterForm
from core.tables import Column, Table

from .graph import tier_name
from .models import Switch
from .selectors import switch_list


def switch_rows() -> QuerySet[Switch]:
    """Live switches with their fabric and effective tier (sortable), in one query."""
    return switch_list().annotate(tier_value=Coalesce("tier_override", "tier_inferred"))


def _oversubscription(s: Switch) -> str:
    return f"{s.down_gbps / s.up_gbps:.2g}:1" if s.up_gbps and s.down_gbps else ""


SWITCH_TABLE = Table(
    id="switches",
    filename="switches.csv",
    default_sort="name",
    empty="No switches yet. Push an ibnetdiscover output to /api/v1/fabrics/NAME/snapshots/.",
    noun="switches",
    columns=(
        Column(
            "Switch",
            lambda s: s.name or s.guid,
            "name",
            link=lambda s: reverse("fabric-switch-detail", args=[s.pk]),
        ),
        Column("Fabric", lambda s: s.fabric.name, "fabric__name"),
        Column("Tier", lambda s: tier_name(s.tier_value) if s.tier_value else "", "tier_value"),
        Column("Rail", lambda s: s.rail, "rail", numeric=True),
        Column("Ports used", lambda s: s.ports_used, "ports_used", numeric=True),
        Column("Ports", lambda s: s.port_count, "port_count", numeric=True),
        Column("Down Gb/s", lambda s: round(s.down_gbps), "down_gbps", numeric=True),
        Column("Up Gb/s", lambda s: round(s.up_gbps), "up_gbps", numeric=True),
        Column("Oversubscription", _oversubscription, numeric=True),
        Column("GUID", lambda s: s.guid, "guid", mono=True),
    ),
)

SWITCH_FILTERS = FilterForm(
    fields=("search", "fabric", "tier", "rail"),
    placeholders={"search": "name, description, GUID"},
)
