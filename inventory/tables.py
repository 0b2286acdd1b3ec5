"""The inventory's list tables (servers, GPUs) and their filter forms, declared once.

Each column serves the page and the CSV export alike (core.tables); rows come from
`selectors.server_list()` / `selectors.gpu_list()`, whose annotations the columns read.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.humanize.templatetags.humanize import naturaltime
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.formats import badge, bytes_iec
from core.forms import FilterForm
from core.tables import Column, Table, iso


def _server_url(server) -> str:
    return reverse("server-detail", args=[server.pk])


def _gpu_url(g) -> str:
    """A GPU's own page: its servers and slots over time, events and replacements."""
    return reverse("gpu-detail", args=[g.pk])


def _server_gpus(s) -> SafeString:
    if s.pci_gpu_count is not None and s.pci_gpu_count > s.gpu_count:
        return format_html(
            '{} <span class="badge warning" title="GPUs on the PCI bus that NVML does not see">'
            "{} on PCI</span>",
            s.gpu_count,
            s.pci_gpu_count,
        )
    return format_html("{}", s.gpu_count)


def _lost_gpus(s) -> SafeString:
    if s.lost_gpu_count:
        return badge("lost", s.lost_gpu_count)
    return format_html("{}", 0)


def _virtual(s) -> SafeString | str:
    if not s.is_virtual:
        return "—"
    on = f" on {s.physical_host.hostname}" if s.physical_host else ""
    return format_html('<span class="badge neutral" title="virtual machine{}">VM</span>', on)


def _live_nodes(s) -> list:
    return [n for n in s.nodes.all() if n.gone_at is None]  # prefetched by server_list()


def _nodes_text(s) -> str:
    return " ".join(f"{n.cluster.name}/{n.name}" for n in _live_nodes(s))


def _nodes_cell(s) -> SafeString | str:
    nodes = _live_nodes(s)
    if not nodes:
        return "—"
    return format_html_join(
        ", ",
        '{} <span class="muted">{}</span>',
        ((n.name, n.cluster.name) for n in nodes),
    )


def _addresses(s) -> str:
    return " ".join(s.addresses or [])


def _health(s) -> SafeString:
    if s.health == "ok":
        return badge("ok")
    url = f"{reverse('finding-list')}?{urlencode({'server': s.pk})}"
    return format_html('<a href="{}">{}</a>', url, badge(s.health))


def _last_seen(s) -> str:
    return naturaltime(s.last_seen) if s.last_seen else "never"


SERVER_TABLE = Table(
    id="servers",
    filename="servers.csv",
    default_sort="hostname",
    empty="No servers yet. Agents appear here within a minute of their first report.",
    noun="servers",
    columns=(
        Column("Hostname", lambda s: s.hostname, "hostname", link=_server_url),
        Column(
            "State", lambda s: s.state_value, "state_value", cell=lambda s: badge(s.state_value)
        ),
        Column("Health", lambda s: s.health, "health", cell=_health),
        Column("GPUs", lambda s: s.gpu_count, "gpu_count", cell=_server_gpus, numeric=True),
        Column(
            "Lost GPUs", lambda s: s.lost_gpu_count, "lost_gpu_count", cell=_lost_gpus, numeric=True
        ),
        Column("MIG devices", lambda s: s.mig_device_count, "mig_device_count", numeric=True),
        Column("Vendor / product", lambda s: f"{s.vendor} {s.product}".strip(), "product"),
        Column("Driver", lambda s: s.driver_version, "driver_version"),
        Column("Rack", lambda s: s.rack, "rack"),
        Column("U", lambda s: s.rack_position, "rack_position", numeric=True),
        Column("Serial", lambda s: s.serial, "serial", mono=True),
        Column("Nodes", _nodes_text, cell=_nodes_cell),
        Column("Addresses", _addresses, mono=True),
        Column(
            "Last seen",
            lambda s: iso(s.last_seen),
            "last_seen",
            cell=_last_seen,
            title=lambda s: iso(s.last_seen),
        ),
        Column("Virtual", lambda s: s.is_virtual, "is_virtual", cell=_virtual),
        Column("System UUID", lambda s: s.system_uuid, mono=True),
    ),
)

SERVER_FILTERS = FilterForm(
    fields=("search", "model", "state", "health", "mig", "rack", "cluster"),
    labels={"model": "GPU model", "mig": "MIG"},
    placeholders={"search": "hostname, serial, IP, GPU UUID/serial/PCI, node"},
    choices={"mig": (("true", "MIG enabled"), ("false", "no MIG"))},
)


def _mig_mode(g) -> SafeString | str:
    if g.mig_mode_current:
        mig = badge("info", "MIG")
        if g.mig_mode_pending is False:
            return format_html("{} {}", mig, badge("warning", "off after reboot"))
        return mig
    if g.mig_mode_pending:
        return badge("warning", "on after reboot")
    return "—"


def _gpu_status(g) -> SafeString:
    counters = format_html_join(
        "", ' <span class="badge warning">{}</span>', ((t,) for t in g.health.counter_texts)
    )
    return format_html("{}{}", badge(g.status), counters)


GPU_TABLE = Table(
    id="gpus",
    filename="gpus.csv",
    default_sort="server__hostname",
    empty="No GPUs yet. They appear with the first report of a server that has them.",
    noun="GPUs",
    columns=(
        Column(
            "Server",
            lambda g: g.server.hostname,
            "server__hostname",
            link=lambda g: reverse("server-detail", args=[g.server_id]),
        ),
        Column("Index", lambda g: g.index, "index", numeric=True, link=_gpu_url),
        Column("Model", lambda g: g.name, "name"),
        Column(
            "Memory",
            lambda g: g.memory_total_bytes,
            "memory_total_bytes",
            cell=lambda g: bytes_iec(g.memory_total_bytes),
            numeric=True,
        ),
        Column("MIG", lambda g: g.mig_mode_current, "mig_mode_current", cell=_mig_mode),
        Column("MIG devices", lambda g: g.mig_device_count, "mig_device_count", numeric=True),
        Column("Status", lambda g: g.status, "status", cell=_gpu_status),
        Column("PCI bus", lambda g: g.pci_bus_id, "pci_bus_id", mono=True),
        Column("Serial", lambda g: g.serial, "serial", mono=True),
        Column("UUID", lambda g: g.uuid, "uuid", mono=True, link=_gpu_url),
    ),
)

GPU_FILTERS = FilterForm(
    fields=("search", "status", "health", "mig_enabled"),
    labels={"mig_enabled": "MIG"},
    placeholders={"search": "UUID, serial, PCI address, model, server, MIG UUID"},
    choices={"mig_enabled": (("true", "enabled"), ("false", "disabled"))},
)
