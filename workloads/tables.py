"""The workloads list's table and filter form, declared once for the page and its CSV."""

from __future__ import annotations

from django.contrib.humanize.templatetags.humanize import naturaltime
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.formats import badge
from core.forms import FilterForm
from core.tables import Column, Table, iso, when

from .describe import locality_text, shape_text
from .models import Workload


def workload_url(w: Workload) -> str:
    return reverse("workload-detail", args=[w.pk])


def shape(w: Workload) -> str:
    return shape_text(w.node_count, w.gpu_count, w.gpus_per_node)


def locality(w: Workload) -> str:
    return locality_text(w.locality if isinstance(w.locality, dict) else {}, w.node_count)


def locality_value(w: Workload) -> str:
    """The CSV's cell: the words, then the verdict (`NVLink within the node; good`)."""
    words = locality(w)
    return f"{words}; {w.verdict}" if words else w.verdict


def _locality_cell(w: Workload) -> SafeString:
    words = locality(w)
    verdict = badge(w.verdict, w.get_verdict_display())
    return format_html("{} {}", words, verdict) if words else verdict


def _started_cell(w: Workload) -> SafeString | str:
    if w.started_at is None:
        return "—"
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        iso(w.started_at),
        when(w.started_at),
        naturaltime(w.started_at),
    )


WORKLOAD_TABLE = Table(
    id="workloads",
    filename="workloads.csv",
    default_sort="-id",
    empty="No workloads yet: they arrive with the clusters' jobs and pods.",
    noun="workloads",
    columns=(
        Column(
            "ID",
            lambda w: w.scheduler_id,
            "scheduler_id",
            link=workload_url,
            title=lambda w: w.name or None,
            mono=True,
        ),
        Column("Cluster", lambda w: w.cluster.name, "cluster__name"),
        Column("Name", lambda w: w.name, "name"),
        Column("User", lambda w: w.user, "user"),
        Column("Account", lambda w: w.account, "account"),
        Column("Shape", shape, "gpu_count"),
        Column("Model", lambda w: ", ".join(w.gpu_models or [])),
        Column("Locality", locality_value, "verdict", cell=_locality_cell),
        Column(
            "State",
            lambda w: w.state,
            "state",
            cell=lambda w: badge(w.state, w.get_state_display()),
        ),
        Column("Started", lambda w: iso(w.started_at), "started_at", cell=_started_cell),
    ),
)

WORKLOAD_FILTERS = FilterForm(
    fields=("cluster", "user", "account", "state", "gpu_model", "verdict"),
    labels={"account": "Account or namespace", "gpu_model": "GPU model", "verdict": "Placement"},
    placeholders={"user": "user name", "account": "account or namespace"},
)
