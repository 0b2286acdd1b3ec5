"""The scheduler layer's list tables (nodes, findings) and their filter forms, declared once.

Each column serves the page and the CSV export alike (core.tables). Node rows come from
`selectors.node_list()` through `selectors.nodes_with_expected()`; finding rows from
`selectors.finding_list()`.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.humanize.templatetags.humanize import naturaltime
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from core.formats import badge, dash
from core.forms import FilterForm
from core.tables import Column, Table, iso, when

from .choices import ClusterKind


def _node_state(n) -> SafeString:
    state = badge(n.state, n.raw_state or n.state, n.state_flags)
    if not n.schedulable and n.ready:
        return format_html("{} {}", state, badge("warning", "not schedulable"))
    return state


def _node_server(n) -> SafeString:
    if n.server is None:
        return badge("warning", "no agent")
    url = reverse("server-detail", args=[n.server_id])
    return format_html('<a href="{}">{}</a>', url, n.server.hostname)


def _kubernetes_allocatable(n) -> SafeString | str:
    if n.kind != ClusterKind.KUBERNETES:
        return "—"
    of = (
        format_html(' <span class="muted">of {}</span>', n.gpu_capacity)
        if n.gpu_allocatable != n.gpu_capacity
        else ""
    )
    mig = ""
    if n.mig_resources:
        slices = format_html_join(" ", "{}× {}", ((c, p) for p, c in n.mig_resources.items()))
        mig = format_html('<br><span class="muted">{}</span>', slices)
    return format_html("{}{}{}", n.gpu_allocatable, of, mig)


def _open_findings(n) -> SafeString:
    """How many open findings are about the node or its server, linked to them."""
    if not n.open_findings:
        return format_html("{}", 0)
    about = {"server": n.server_id} if n.server_id else {"node": n.pk}
    url = f"{reverse('finding-list')}?{urlencode(about)}"
    return format_html('<a href="{}">{}</a>', url, n.open_findings)


def _when_server(n, value):
    return value if n.server is not None else None


NODE_TABLE = Table(
    id="nodes",
    filename="nodes.csv",
    default_sort="cluster__name",
    empty=mark_safe(
        "No nodes yet. Post a snapshot (<code>kubectl get nodes -o json</code>, "
        "<code>scontrol show node</code>) to <code>/api/v1/clusters/&lt;name&gt;/snapshots/</code>,"
        " or register a cluster to pull."
    ),
    noun="nodes",
    row_class=lambda n: "mismatch" if n.disagrees else "",
    columns=(
        Column(
            "Node",
            lambda n: n.name,
            "name",
            cell=lambda n: format_html(
                '<a href="{}">{}</a>', reverse("node-detail", args=[n.pk]), n.name
            ),
        ),
        Column(
            "Cluster",
            lambda n: n.cluster.name,
            "cluster__name",
            cell=lambda n: format_html(
                '{} <span class="muted">{}</span>', n.cluster.name, n.get_kind_display()
            ),
        ),
        Column("State", lambda n: n.raw_state or n.state, "state", cell=_node_state),
        Column(
            "Server",
            lambda n: n.server.hostname if n.server else "",
            "server__hostname",
            cell=_node_server,
        ),
        Column(
            "Bound by",
            lambda n: n.binding_method,
            "binding_method",
            cell=lambda n: dash(n.get_binding_method_display()),
        ),
        Column("Expected", lambda n: n.expected_gpus, numeric=True),
        Column(
            "PCI bus",
            lambda n: n.server.pci_gpu_count if n.server else None,
            "server__pci_gpu_count",
            numeric=True,
        ),
        Column(
            "NVML",
            lambda n: _when_server(n, n.agent_gpu_count),
            "agent_gpu_count",
            numeric=True,
        ),
        Column(
            "Kubernetes alloc.",
            lambda n: n.gpu_allocatable if n.kind == ClusterKind.KUBERNETES else None,
            cell=_kubernetes_allocatable,
            numeric=True,
        ),
        Column(
            "Slurm GRES",
            lambda n: n.gpu_capacity if n.kind == ClusterKind.SLURM else None,
            numeric=True,
        ),
        Column("In use", lambda n: n.gpu_used, "gpu_used", numeric=True),
        Column(
            "Open findings",
            lambda n: n.open_findings,
            "open_findings",
            cell=_open_findings,
            numeric=True,
        ),
        Column(
            "Worst finding",
            lambda n: n.worst_severity,
            "worst_severity",
            cell=lambda n: badge(n.worst_severity) if n.worst_severity else "—",
        ),
    ),
)

NODE_FILTERS = FilterForm(
    fields=("search", "cluster", "kind", "bound", "state"),
    labels={"kind": "Scheduler"},
    placeholders={"search": "node or server name"},
    choices={"bound": (("true", "to a server"), ("false", "no server"))},
)


def _finding_about(f) -> SafeString:
    parts = []
    if f.server:
        url = reverse("server-detail", args=[f.server_id])
        parts.append(format_html('<a href="{}">{}</a>', url, f.server.hostname))
    if f.node:
        parts.append(
            format_html(
                '<a href="{}">{}</a> <span class="muted">{}</span>',
                reverse("node-detail", args=[f.node_id]),
                f.node.name,
                f.node.cluster.name,
            )
        )
    elif f.cluster:
        query = urlencode({"cluster": f.cluster.name})
        parts.append(
            format_html('<a href="{}?{}">{}</a>', reverse("node-list"), query, f.cluster.name)
        )
    return mark_safe("<br>".join(parts))  # noqa: S308 (each part built by format_html)


def _finding_about_text(f) -> str:
    names = [f.server.hostname] if f.server else []
    if f.node:
        names.append(f"{f.node.cluster.name}/{f.node.name}")
    elif f.cluster:
        names.append(f.cluster.name)
    return " ".join(names)


def _finding_type(f) -> SafeString:
    reopened = (
        format_html(' <span class="muted" title="reopened">↻{}</span>', f.reopened_count)
        if f.reopened_count
        else ""
    )
    marks = []
    if f.acknowledged:
        marks.append(badge("info", "acknowledged"))
    if f.silenced():
        marks.append(badge("neutral", "silenced"))
    return format_html(
        '<a href="{}">{}</a>{} {}',
        reverse("finding-detail", args=[f.pk]),
        f.get_type_display(),
        reopened,
        mark_safe(" ".join(marks)),  # noqa: S308 (badges escape their text)
    )


def _finding_message(f) -> SafeString:
    return format_html('<a href="{}">{}</a>', reverse("finding-detail", args=[f.pk]), f.message)


def _moment(value) -> SafeString | str:
    """The time itself, then how long ago: "3 minutes ago" alone says nothing once copied."""
    if not value:
        return "—"
    return format_html('{} <span class="muted">({})</span>', when(value), naturaltime(value))


def _seen(attr: str):
    return Column(
        {"first_seen": "First seen", "last_seen": "Last seen", "resolved_at": "Resolved"}[attr],
        lambda f: iso(getattr(f, attr)),
        attr,
        cell=lambda f: _moment(getattr(f, attr)),
        title=lambda f: iso(getattr(f, attr)),
    )


_FINDING_COLUMNS = (
    Column("Severity", lambda f: f.severity, "severity_rank", cell=lambda f: badge(f.severity)),
    Column("Type", lambda f: f.get_type_display(), "type", cell=_finding_type),
    Column("About", _finding_about_text, cell=_finding_about),
    Column("Message", lambda f: f.message, cell=_finding_message),
    _seen("first_seen"),
    _seen("last_seen"),
)

OPEN_FINDING_TABLE = Table(
    id="findings",
    filename="findings.csv",
    default_sort="severity_rank",
    empty="Nothing disagrees. Every node has its server and every count matches.",
    noun="open findings",
    clear="?open=true",
    row_class=lambda f: f"sev-{f.severity}",
    columns=_FINDING_COLUMNS,
)

RESOLVED_FINDING_TABLE = Table(
    id="findings",
    filename="findings.csv",
    default_sort="-last_seen",
    empty="No resolved findings.",
    noun="resolved findings",
    clear="?open=false",
    row_class=lambda f: f"sev-{f.severity}",
    columns=(*_FINDING_COLUMNS, _seen("resolved_at")),
)


def finding_table(*, open_only: bool) -> Table:
    """Open findings have no Resolved column; the resolved list (and its CSV) has one."""
    return OPEN_FINDING_TABLE if open_only else RESOLVED_FINDING_TABLE


FINDING_FILTERS = FilterForm(
    fields=("type", "severity", "cluster"),
    hidden=("open",),
)
