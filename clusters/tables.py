"""The scheduler layer's list table (nodes) and its filter form, declared once.

Each column serves the page and the CSV export alike (core.tables). Node rows come from
`selectors.node_list()` through `selectors.nodes_with_expected()`.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from core.formats import badge, dash
from core.forms import FilterForm
from core.tables import Column, Table

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
            "Driver",
            lambda n: n.driver_version,
            "driver_version",
            title=lambda n: (
                "the bound server's agent"
                if n.server is not None and n.server.driver_version
                else ("the node's label" if n.driver_version else None)
            ),
            mono=True,
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
