"""Figure builders: pure data in, Plotly figure dicts out, checked on their data."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import plotly.graph_objects as go
import pytest
from plotly.utils import PlotlyJSONEncoder

from core.palette import PALETTE
from inventory.choices import link_rank
from topology import figures
from topology.figures import (
    MAX_MARKS,
    SPEED_SCALE,
    FleetRows,
    esc,
    fleet_hierarchy_figure,
    interconnect_matrix_figure,
    link_class_colours,
    mig_layout_figure,
    nvlink_graph_figure,
    rack_figure,
    server_node_map_figure,
)
from topology.figures.racks import chassis_height_u
from topology.interconnect import describe_link_class, interconnect_matrix, legend

EVIL_HOST = "<img src=x onerror=alert(1)>"
EVIL_GPU = "<script>"


# Builders of plain input --------------------------------------------------------------


def interconnect(
    gpus: int = 8,
    *,
    gpu_class: str | dict[tuple[int, int], str] = "NV18",
    nics: int = 2,
    nvswitch_count: int | None = 4,
    name: str = "NVIDIA H100 80GB HBM3",
    nic_name: str = "mlx5_{n}",
) -> dict[str, Any]:
    """What `server_interconnect` returns, built by hand: GPUs half on NUMA 0, half on 1."""
    devices = [
        {
            "key": f"GPU{i}",
            "kind": "gpu",
            "id": i + 1,
            "index": i,
            "name": name,
            "uuid": f"GPU-{i:04d}",
            "numa_node": 0 if i < gpus // 2 else 1,
            "pci_bus_id": f"0000:{0x18 + i:02x}:00.0",
            "mig_enabled": False,
            "cpu_affinity": "0-55" if i < gpus // 2 else "56-111",
        }
        for i in range(gpus)
    ]
    nic_keys = [nic_name.format(n=n) for n in range(nics)]
    devices += [
        {
            "key": key,
            "kind": "nic",
            "id": 100 + n,
            "name": key,
            "netdev": f"ib{n}",
            "numa_node": 0,
            "pci_bus_id": "",
            "speed_mbps": 400000,
            "nic_kind": "infiniband",
        }
        for n, key in enumerate(nic_keys)
    ]
    links = []
    for a in range(gpus):
        for b in range(a + 1, gpus):
            link_class = gpu_class if isinstance(gpu_class, str) else gpu_class.get((a, b), "SYS")
            links.append({"a": f"GPU{a}", "b": f"GPU{b}", "link_class": link_class})
    for a in range(gpus):
        for n, key in enumerate(nic_keys):
            links.append({"a": f"GPU{a}", "b": key, "link_class": "PIX" if a == n else "SYS"})
    return {
        "server": {"id": 1, "hostname": "dgx-01"},
        "devices": devices,
        "links": links,
        "nvswitch_count": nvswitch_count,
        "matrix": interconnect_matrix(devices, links),
        "legend": legend(link["link_class"] for link in links),
    }


def mig_gpu(index: int, instances: list[tuple], name: str = "NVIDIA A100-SXM4-80GB") -> dict:
    """instances: (profile, gpu_instance_id, compute_instance_id, start, size)."""
    return {
        "index": index,
        "name": name,
        "uuid": f"GPU-{index}",
        "mig_enabled": True,
        "mig_devices": [
            {
                "uuid": f"MIG-{index}-{gi}-{ci}",
                "profile": profile,
                "gpu_instance_id": gi,
                "compute_instance_id": ci,
                "placement_start": start,
                "placement_size": size,
                "memory_bytes": 10 * 2**30,
            }
            for profile, gi, ci, start, size in instances
        ],
    }


def fleet_rows(
    servers: int,
    *,
    gpus_per_server: int = 8,
    servers_per_rack: int = 8,
    clusters: tuple[str, ...] = ("prod-k8s", "hpc-slurm"),
    both_every: int = 10,
    unscheduled_every: int = 50,
    vm_hosts: int = 1,
    vms_per_host: int = 2,
    orphans: int = 1,
    mig_every: int = 5,
    models: tuple[str, ...] = ("DGXH100", "DGXA100"),
    hostname: str = "gpu-{i:05d}",
    gpu_model: str = "",
) -> FleetRows:
    """A generated fleet as plain rows, as `topology.selectors.fleet_rows` reads them.

    Server i is bound to one node in clusters[i % len]; every `both_every`-th also to a node
    of the next cluster; every `unscheduled_every`-th to none. The first `vm_hosts` servers
    are hypervisors without GPUs of their own, each with `vms_per_host` one-GPU VMs.
    """
    rows: FleetRows = {"servers": [], "gpus": [], "mig_devices": [], "nodes": []}
    node_id = 0

    def node(name: str, cluster: str, server_id: int | None) -> None:
        nonlocal node_id
        node_id += 1
        rows["nodes"].append(
            {
                "id": node_id,
                "name": name,
                "cluster": cluster,
                "kind": "slurm" if "slurm" in cluster else "kubernetes",
                "server_id": server_id,
                "binding_method": "system_uuid" if server_id else "",
                "gpu_capacity": gpus_per_server,
            }
        )

    next_id = 1
    for i in range(servers):
        sid = next_id
        next_id += 1
        host = hostname.format(i=i)
        model = models[i % len(models)]
        hypervisor = i < vm_hosts
        rows["servers"].append(
            {
                "id": sid,
                "hostname": host,
                "model": model,
                "rack": f"r{i // servers_per_rack + 1:03d}",
                "rack_position": 2 + 4 * (i % servers_per_rack),
                "is_virtual": False,
                "physical_host_id": None,
                "state": "online",
            }
        )
        if hypervisor:
            for v in range(vms_per_host):
                vid = next_id
                next_id += 1
                rows["servers"].append(
                    {
                        "id": vid,
                        "hostname": f"{host}-vm{v}",
                        "model": "Standard PC (Q35 + ICH9, 2009)",
                        "rack": "",
                        "rack_position": None,
                        "is_virtual": True,
                        "physical_host_id": sid,
                        "state": "online",
                    }
                )
                rows["gpus"].append(
                    {"server_id": vid, "model": "NVIDIA H100 PCIe", "count": 1, "mig_count": 0}
                )
                node(f"{host}-vm{v}", clusters[0], vid)
            continue
        name = gpu_model or ("NVIDIA H100 80GB HBM3" if model == "DGXH100" else "NVIDIA A100")
        mig = gpus_per_server // 2 if mig_every and i % mig_every == 0 else 0
        rows["gpus"].append(
            {"server_id": sid, "model": name, "count": gpus_per_server, "mig_count": mig}
        )
        if mig:
            rows["mig_devices"] += [
                {"server_id": sid, "model": name, "profile": "1g.10gb", "count": 7 * (mig - 1)},
                {"server_id": sid, "model": name, "profile": "3g.40gb", "count": 2},
            ]
        if unscheduled_every and i % unscheduled_every == unscheduled_every - 1:
            continue
        node(host, clusters[i % len(clusters)], sid)
        if both_every and i % both_every == 0 and len(clusters) > 1:
            node(host, clusters[(i + 1) % len(clusters)], sid)
    for n in range(orphans):
        node(f"ghost-{n}", clusters[0], None)
    return rows


def validate(figure: dict) -> dict:
    """Plotly's own schema accepts it, and it is JSON as the API and json_script send it."""
    go.Figure(figure)
    json.loads(json.dumps(figure, cls=PlotlyJSONEncoder))
    json.dumps(figure)
    return figure


def strings(value: Any) -> list[str]:
    """Every string anywhere in a figure: labels, hover text, ticks, ids, legend names."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in [key, *strings(item)]]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in strings(item)]
    return []


def trace(figure: dict, type_: str, name: str | None = None) -> dict:
    matches = [
        t for t in figure["data"] if t["type"] == type_ and (name is None or t.get("name") == name)
    ]
    assert matches, f"no {type_} trace {name or ''}"
    return matches[0]


def gpu_total(rows: FleetRows) -> int:
    return sum(r["count"] for r in rows["gpus"])


# Escaping -------------------------------------------------------------------------------


def test_esc_turns_markup_into_text_plotly_decodes():
    assert esc(EVIL_HOST) == "&lt;img src=x onerror=alert(1)&gt;"
    assert esc(EVIL_GPU) == "&lt;script&gt;"
    assert esc("a & b") == "a &amp; b"
    # plotly.js decodes only a few named entities: quotes must stay as they are
    assert esc('say "hi"') == 'say "hi"'
    assert esc(None) == ""


# Interconnect matrix --------------------------------------------------------------------


def test_matrix_cells_carry_each_pair_class_with_both_devices_in_the_hover():
    data = interconnect(4, nics=1)
    figure = validate(interconnect_matrix_figure(data))
    heatmap = trace(figure, "heatmap")
    assert heatmap["x"] == ["GPU0", "GPU1", "GPU2", "GPU3", "mlx5_0"]
    assert heatmap["text"][0][1] == "NV18"
    assert heatmap["text"][0][4] == "PIX"
    assert heatmap["text"][1][4] == "SYS"
    assert heatmap["text"][2][2] == "X"
    assert heatmap["z"][2][2] is None
    hover = heatmap["hovertext"][1][4]
    assert "GPU1" in hover and "mlx5_0" in hover and "SMP link between NUMA nodes" in hover
    assert describe_link_class("NV18") in heatmap["hovertext"][0][1]
    # the same class, the same colour band
    assert heatmap["z"][0][1] == heatmap["z"][3][2]
    assert figure["layout"]["yaxis"]["autorange"] == "reversed"


def test_matrix_legend_explains_every_class_present_fastest_first():
    classes = {(0, 1): "NV12", (2, 3): "NV4", (0, 2): "PXB", (1, 3): "PHB", (0, 3): "NODE"}
    data = interconnect(4, gpu_class=classes, nics=2)
    figure = validate(interconnect_matrix_figure(data))
    heatmap = trace(figure, "heatmap")
    present = {c for row in data["matrix"] for c in row if c not in ("", "X")}
    assert present == {"NV12", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"}

    swatches = [t for t in figure["data"] if t["type"] == "scatter"]
    named = [t["name"].split("</b>")[0].removeprefix("<b>") for t in swatches]
    assert named == sorted(present, key=link_rank)
    assert named[0] == "NV12" and named[-1] == "SYS"
    for t in swatches:
        link_class = t["name"].split("</b>")[0].removeprefix("<b>")
        assert esc(describe_link_class(link_class)) in t["name"]
        assert t["showlegend"] is True

    colours = [t["marker"]["color"] for t in swatches]
    positions = [SPEED_SCALE.index(c) for c in colours]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)

    # each cell's colour is its class's legend colour
    scale = heatmap["colorscale"]
    k = len(colours)
    assert heatmap["zmin"] == -0.5 and heatmap["zmax"] == k - 0.5
    for i, colour in enumerate(colours):
        assert [i / k, colour] in scale and [(i + 1) / k, colour] in scale
    for row_text, row_z in zip(heatmap["text"], heatmap["z"], strict=True):
        for text, z in zip(row_text, row_z, strict=True):
            if z is not None:
                assert named[z] == text


def test_link_class_colours_run_from_green_to_red_with_unknown_classes_last():
    palette = link_class_colours(["SYS", "NV2", "PIX", "NV18", "XYZ", "NODE"])
    assert [c for c, _ in palette] == ["NV18", "NV2", "PIX", "NODE", "SYS", "XYZ"]
    assert palette[0][1] == figures.NVLINK_COLOURS[0]
    assert palette[-1][1] == figures.UNKNOWN_COLOUR
    positions = [SPEED_SCALE.index(colour) for _, colour in palette]
    assert positions == sorted(positions)


def test_matrix_without_devices_says_so():
    figure = validate(interconnect_matrix_figure({"devices": [], "links": [], "matrix": []}))
    assert figure["layout"]["meta"]["empty"] is True
    assert "No GPUs or NICs" in figure["layout"]["annotations"][0]["text"]


# NVLink graph ---------------------------------------------------------------------------


def test_nvswitch_fabric_is_one_hub_not_all_pairs():
    figure = validate(nvlink_graph_figure(interconnect(8, nvswitch_count=4)))
    edges = trace(figure, "scatter", "NV18: 18 NVLinks per GPU to the NVSwitches")
    segments = len(edges["x"]) // 3
    assert segments == 8  # one per GPU, not 28
    assert all(edges["x"][i + 1] == 0.0 and edges["y"][i + 1] == 0.0 for i in range(0, 24, 3))
    hub = trace(figure, "scatter", "NVSwitch fabric")
    assert hub["x"] == [0] and "4 NVSwitches" in hub["text"][0]
    assert figure["layout"]["meta"]["nvswitch_hub"] is True


def test_direct_nvlinks_are_drawn_per_pair_wider_with_more_links():
    classes = {(0, 1): "NV2", (2, 3): "NV2", (0, 2): "NV1", (1, 3): "NV1", (0, 3): "NV1"}
    figure = validate(nvlink_graph_figure(interconnect(4, gpu_class=classes, nvswitch_count=0)))
    double = trace(figure, "scatter", "NV2: 2 NVLinks between the pair")
    single = trace(figure, "scatter", "NV1: 1 NVLink between the pair")
    assert len(double["x"]) // 3 == 2
    assert len(single["x"]) // 3 == 3
    assert double["line"]["width"] > single["line"]["width"]
    assert not [t for t in figure["data"] if t.get("name") == "NVSwitch fabric"]
    hover = [t for t in figure["data"] if t.get("hovertext") and "↔" in t["hovertext"][0]]
    assert any("<b>GPU0</b> ↔ <b>GPU1</b>: NV2" in h for t in hover for h in t["hovertext"])


def test_gpus_are_grouped_and_coloured_by_numa_node():
    figure = validate(nvlink_graph_figure(interconnect(8)))
    numa0 = next(t for t in figure["data"] if t.get("name", "").startswith("NUMA node 0"))
    numa1 = next(t for t in figure["data"] if t.get("name", "").startswith("NUMA node 1"))
    assert numa0["text"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert numa1["text"] == ["GPU4", "GPU5", "GPU6", "GPU7"]
    assert numa0["marker"]["color"] != numa1["marker"]["color"]
    assert "CPUs 0-55" in numa0["name"]
    # each group sits on its own side of the circle
    assert all(x >= 0 for x in numa0["x"]) and all(x <= 0 for x in numa1["x"])


def test_nics_are_optional_and_sit_by_their_pcie_switch_gpu():
    with_nics = validate(nvlink_graph_figure(interconnect(8, nics=2)))
    nics = trace(with_nics, "scatter", "NIC")
    assert nics["text"] == ["mlx5_0", "mlx5_1"]
    assert "closest GPU: GPU0 (PIX)" in nics["hovertext"][0]
    without = validate(nvlink_graph_figure(interconnect(8, nics=2), include_nics=False))
    assert not [t for t in without["data"] if t.get("name") == "NIC"]


def test_gpus_without_nvlink_say_they_use_pcie():
    figure = validate(nvlink_graph_figure(interconnect(4, gpu_class="PHB", nvswitch_count=0)))
    assert "No NVLink" in figure["layout"]["title"]["text"]
    assert not [t for t in figure["data"] if t.get("mode") == "lines" and "NV" in t["name"]]


def test_a_server_without_nvlink_shows_its_pcie_tree():
    """4 x L40S: each GPU behind its host bridge, NIC n on GPU n's PCIe switch, two sockets."""
    data = interconnect(4, gpu_class="SYS", nvswitch_count=0, nics=2)
    figure = validate(nvlink_graph_figure(data))
    assert figure["layout"]["meta"]["nvlink"] is False
    gpus = trace(figure, "scatter", "GPU")
    assert sorted(gpus["text"]) == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert set(gpus["y"]) == {0.0}  # the leaves of the tree, not floating circles
    hubs = trace(figure, "scatter", "PCIe switch or host bridge")
    assert hubs["text"].count("PCIe switch") == 2  # GPU0+mlx5_0, GPU1+mlx5_1
    assert hubs["text"].count("host bridge") == 2  # GPU2, GPU3
    numa = trace(figure, "scatter", "NUMA node (CPU socket)")
    assert numa["text"] == ["NUMA node 0", "NUMA node 1"]
    edges = trace(figure, "scatter", "PCIe")
    assert len(edges["x"]) // 3 == 6 + 4  # a line to every device, one per hub to its socket
    assert "No NVLink between these 4 GPUs" in figure["layout"]["title"]["text"]


def test_matrix_cells_keep_their_labels_inside_at_a_minimum_size():
    small = interconnect_matrix_figure(interconnect(4, nics=0))
    big = interconnect_matrix_figure(interconnect(8, nics=10))
    for figure, devices in ((small, 4), (big, 18)):
        heatmap = trace(figure, "heatmap")
        assert 10 <= heatmap["textfont"]["size"] <= 12
        # cells at least 40 px: `NODE` at 12 px (about 4 x 7.5 px) fits inside
        assert figure["layout"]["meta"]["min_width"] >= 40 * devices
        assert figure["layout"]["height"] >= 40 * devices
    assert trace(big, "heatmap")["textfont"]["size"] < trace(small, "heatmap")["textfont"]["size"]


def test_mig_ring_is_a_closed_circle_not_wedges_past_it():
    rows = fleet_rows(6, vm_hosts=0, orphans=0, mig_every=3)  # MIG on servers 0 and 3 only
    items = sectors(validate(fleet_hierarchy_figure(rows)))
    children: dict[str, float] = Counter()
    for s in items:
        children[s["parent"]] += s["value"]
    models = [s for s in items if s["level"] == "gpu_model"]
    assert models
    for model in models:  # every model sector, MIG or not, is covered by the outer ring
        assert children[model["id"]] == pytest.approx(model["value"], abs=1e-3), model["id"]
    whole = [s for s in items if s["level"] == "whole_gpus"]
    assert whole and all(s["label"] == "" for s in whole)
    assert_branch_totals_hold(items)
    no_mig = fleet_rows(3, vm_hosts=0, orphans=0, mig_every=0)
    items = sectors(validate(fleet_hierarchy_figure(no_mig)))
    assert not [s for s in items if s["level"] == "whole_gpus"]  # no ring without MIG


def test_sunburst_labels_take_their_largest_orientation_at_a_minimum_width():
    figure = validate(fleet_hierarchy_figure(fleet_rows(10)))
    assert trace(figure, "sunburst")["insidetextorientation"] == "auto"
    assert figure["layout"]["meta"]["min_width"] >= 480


# MIG layout -----------------------------------------------------------------------------


def bars(figure: dict, name: str) -> list[tuple[str, int, int, str]]:
    t = trace(figure, "bar", name)
    return list(zip(t["y"], t["base"], t["x"], t.get("text") or [""] * len(t["y"]), strict=True))


def test_mig_instances_cover_their_placement_with_profile_labels():
    gpu = mig_gpu(
        1,
        [
            ("3g.40gb", 2, 0, 4, 4),
            ("2g.20gb", 3, 0, 0, 2),
            ("1g.10gb", 9, 0, 2, 1),
            ("1g.10gb", 10, 0, 3, 1),
        ],
    )
    figure = validate(mig_layout_figure([gpu]))
    assert bars(figure, "3g.40gb") == [
        ("GPU1 compute", 4, 3, "3g.40gb"),
        ("GPU1 memory", 4, 4, "GI 2"),
    ]
    assert bars(figure, "2g.20gb") == [
        ("GPU1 compute", 0, 2, "2g.20gb"),
        ("GPU1 memory", 0, 2, "GI 3"),
    ]
    assert sorted(bars(figure, "1g.10gb")) == [
        ("GPU1 compute", 2, 1, "1g.10gb"),
        ("GPU1 compute", 3, 1, "1g.10gb"),
        ("GPU1 memory", 2, 1, "GI 9"),
        ("GPU1 memory", 3, 1, "GI 10"),
    ]
    # legend: one entry per profile, smallest first, after the free slots
    assert [t["name"] for t in figure["data"]] == ["free slice", "1g.10gb", "2g.20gb", "3g.40gb"]
    hover = trace(figure, "bar", "3g.40gb")["hovertext"][0]
    assert "compute slices 4–6, memory slices 4–7" in hover and "MIG-1-2-0" in hover
    assert figure["layout"]["yaxis"]["categoryarray"] == ["GPU1 compute", "GPU1 memory"]


def test_a_gpu_in_mig_mode_without_instances_shows_its_empty_slices():
    empty = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "mig_enabled": True, "mig_devices": []}
    figure = validate(mig_layout_figure([empty]))
    assert [t["name"] for t in figure["data"]] == ["free slice"]
    free = bars(figure, "free slice")
    assert Counter(y for y, *_ in free) == {"GPU0 compute": 7, "GPU0 memory": 8}
    assert sorted(base for y, base, *_ in free if y == "GPU0 memory") == list(range(8))


def test_compute_instances_of_one_gpu_instance_share_its_block():
    gpu = mig_gpu(3, [("1c.3g.40gb", 2, ci, 4, 4) for ci in range(3)] + [("4g.40gb", 1, 0, 0, 4)])
    figure = validate(mig_layout_figure([gpu]))
    assert bars(figure, "3g.40gb") == [
        ("GPU3 compute", 4, 3, "3g.40gb · 3 CIs"),
        ("GPU3 memory", 4, 4, "GI 2"),
    ]
    hover = trace(figure, "bar", "3g.40gb")["hovertext"][0]
    assert hover.count("1c.3g.40gb") == 3


def test_mig_layout_skips_gpus_without_mig_and_a30_has_four_slices():
    plain = {"index": 0, "name": "NVIDIA H100", "mig_enabled": False, "mig_devices": []}
    a30 = mig_gpu(1, [("2g.12gb", 1, 0, 0, 2)], name="NVIDIA A30")
    figure = validate(mig_layout_figure([plain, a30]))
    free = bars(figure, "free slice")
    assert Counter(y for y, *_ in free) == {"GPU1 compute": 4, "GPU1 memory": 4}
    assert validate(mig_layout_figure([plain]))["layout"]["meta"]["empty"] is True


def test_instances_without_placement_are_named_not_drawn():
    gpu = mig_gpu(0, [("1g.10gb", 5, 0, None, None)])
    figure = validate(mig_layout_figure([gpu]))
    assert [t["name"] for t in figure["data"]] == ["free slice"]
    assert "GPU0 GI 5 (1g.10gb)" in figure["layout"]["annotations"][0]["text"]


# Fleet hierarchy ------------------------------------------------------------------------


def sectors(figure: dict) -> list[dict]:
    t = trace(figure, "sunburst")
    return [
        {"id": i, "parent": p, "label": label, "value": v, "level": c[0], "count": c[1], "hover": h}
        for i, p, label, v, c, h in zip(
            t["ids"],
            t["parents"],
            t["labels"],
            t["values"],
            t["customdata"],
            t["hovertext"],
            strict=True,
        )
    ]


def assert_branch_totals_hold(items: list[dict]) -> None:
    """branchvalues "total": a parent's value is at least its children's sum."""
    children: dict[str, float] = Counter()
    for s in items:
        children[s["parent"]] += s["value"]
    values = {s["id"]: s["value"] for s in items}
    for parent, total in children.items():
        if parent:
            assert values[parent] >= total - 1e-9, parent
    assert len(values) == len(items)  # ids unique


def test_hierarchy_totals_equal_the_inventory():
    rows = fleet_rows(30)
    figure = validate(fleet_hierarchy_figure(rows))
    items = sectors(figure)
    total = gpu_total(rows)
    assert items[0]["id"] == "fleet" and items[0]["value"] == total
    assert sum(s["value"] for s in items if s["level"] == "gpu_model") == total
    assert sum(s["value"] for s in items if s["level"] == "group") == total
    assert sum(s["value"] for s in items if s["level"] == "node") == total
    mig = sum(r["count"] for r in rows["mig_devices"])
    assert sum(s["count"] for s in items if s["level"] == "mig") == mig
    assert_branch_totals_hold(items)
    assert figure["layout"]["meta"]["aggregated"] is False


def test_a_server_in_two_schedulers_is_counted_once_under_both_names():
    rows = fleet_rows(3, both_every=3, vm_hosts=0, orphans=0, mig_every=0)
    items = sectors(validate(fleet_hierarchy_figure(rows)))
    groups = {s["label"]: s["value"] for s in items if s["level"] == "group"}
    assert groups == {"hpc-slurm": 8, "hpc-slurm + prod-k8s": 8, "prod-k8s": 8}
    assert items[0]["value"] == 24


def test_each_node_is_labelled_with_its_server_and_unscheduled_servers_have_a_group():
    rows = fleet_rows(4, vm_hosts=1, vms_per_host=1, unscheduled_every=4, orphans=0)
    rows["nodes"][0]["name"] = "k8s-worker-a"  # a node named unlike its server
    items = sectors(validate(fleet_hierarchy_figure(rows)))
    nodes = {s["label"]: s for s in items if s["level"] == "node"}
    assert "k8s-worker-a<br>on gpu-00000-vm0" in nodes
    assert "VM on gpu-00000" in nodes["k8s-worker-a<br>on gpu-00000-vm0"]["hover"]
    assert "gpu-00001" in nodes and "kubernetes node" not in nodes["gpu-00001"]["hover"]
    assert nodes["gpu-00003"]["parent"] == "c:no scheduler"
    assert "in no scheduler" in nodes["gpu-00003"]["hover"]


def test_mig_sectors_are_sized_in_gpus_and_never_overflow_their_gpu_model():
    rows = fleet_rows(1, vm_hosts=0, orphans=0, mig_every=1, gpus_per_server=8)
    # 4 GPUs in MIG mode: 21 x 1g (3 GPUs) + 2 x 3g (6/7 GPU)
    items = sectors(validate(fleet_hierarchy_figure(rows)))
    mig = {s["label"]: s for s in items if s["level"] == "mig"}
    assert mig["1g.10gb × 21"]["value"] == pytest.approx(3.0, abs=1e-3)
    assert mig["3g.40gb × 2"]["value"] == pytest.approx(6 / 7, abs=1e-3)
    # a report that claims more instances than fit is scaled down, not drawn broken
    rows["mig_devices"][0]["count"] = 500
    assert_branch_totals_hold(sectors(fleet_hierarchy_figure(rows)))


def test_large_groups_are_grouped_by_server_model():
    rows = fleet_rows(450, clusters=("prod-k8s",), both_every=0, vm_hosts=0)
    figure = validate(fleet_hierarchy_figure(rows, node_limit=200))
    items = sectors(figure)
    assert not [s for s in items if s["level"] == "node" and s["parent"] == "c:prod-k8s"]
    assert len([s for s in items if s["parent"] == "c:no scheduler"]) == 9  # small: by node
    models = {s["label"] for s in items if s["level"] == "server_model"}
    assert models == {"DGXH100 × 225", "DGXA100 × 216"}
    assert sum(s["value"] for s in items if s["level"] == "gpu_model") == gpu_total(rows)
    assert figure["layout"]["meta"]["aggregated"] is True


def test_no_gpus_is_an_empty_figure():
    rows = fleet_rows(0, vm_hosts=0, orphans=0)
    assert validate(fleet_hierarchy_figure(rows))["layout"]["meta"]["empty"] is True


# Server-to-node map ---------------------------------------------------------------------


def sankey_links(figure: dict) -> list[tuple[str, str, int]]:
    t = trace(figure, "sankey")
    labels = t["node"]["label"]
    link = t["link"]
    return [
        (labels[s], labels[d], v)
        for s, d, v in zip(link["source"], link["target"], link["value"], strict=True)
    ]


def test_sankey_links_equal_the_bindings():
    rows = fleet_rows(12, vm_hosts=1, vms_per_host=2, unscheduled_every=6, orphans=2)
    figure = validate(server_node_map_figure(rows))
    links = sankey_links(figure)
    hostnames = {s["id"]: s for s in rows["servers"]}

    def server_label(sid: int) -> str:
        s = hostnames[sid]
        return s["hostname"] + (" (VM)" if s["is_virtual"] else "")

    bindings = {
        (server_label(n["server_id"]), f"{n['cluster']}/{n['name']}")
        for n in rows["nodes"]
        if n["server_id"]
    }
    drawn = {(a, b) for a, b, _ in links if "/" in b and a not in ("no agent",)}
    assert drawn == bindings
    assert all(v == 1 for a, b, v in links if (a, b) in bindings)
    # VMs hang between their host and their nodes
    assert ("gpu-00000", "gpu-00000-vm0 (VM)", 1) in links
    assert ("gpu-00000", "gpu-00000-vm1 (VM)", 1) in links
    # servers in no scheduler, nodes without an agent
    assert {a for a, b, _ in links if b == "no scheduler"} == {"gpu-00005", "gpu-00011"}
    assert {b for a, b, _ in links if a == "no agent"} == {"prod-k8s/ghost-0", "prod-k8s/ghost-1"}
    names = [t["name"] for t in figure["data"] if t["type"] == "scatter"]
    assert names == [
        "physical server",
        "virtual machine (server)",
        "Kubernetes node",
        "Slurm node",
        "server in no scheduler",
        "node without an agent",
    ]
    assert figure["layout"]["meta"]["aggregated"] is False


def test_sankey_binding_hover_says_how_it_was_bound():
    rows = fleet_rows(2, vm_hosts=0, orphans=0)
    t = trace(validate(server_node_map_figure(rows)), "sankey")
    assert any("bound by system uuid" in text for text in t["link"]["customdata"])


def to_cluster(label: str) -> bool:
    """An aggregated map's cluster: `prod-k8s · 1,204 nodes`."""
    return re.search(r" · [\d,]+ nodes?$", label) is not None


def test_large_maps_group_servers_by_model_and_nodes_by_cluster():
    rows = fleet_rows(600, vm_hosts=2, orphans=3)
    figure = validate(server_node_map_figure(rows))
    links = sankey_links(figure)
    assert figure["layout"]["meta"]["aggregated"] is True
    bound = sum(1 for n in rows["nodes"] if n["server_id"])
    binding_links = [(a, b, v) for a, b, v in links if to_cluster(b) and a != "no agent"]
    assert sum(v for _, _, v in binding_links) == bound
    assert sum(v for a, _, v in links if a == "no agent") == 3
    assert sum(v for _, b, v in links if b == "no scheduler") == 12
    assert len(links) < 20


# Racks ----------------------------------------------------------------------------------


def test_rack_view_places_each_server_at_its_position_and_height_coloured_by_health():
    rows = fleet_rows(10, servers_per_rack=4, vm_hosts=1)
    rows["servers"][3]["health"] = "critical"  # server id 4
    rows["servers"][4]["health"] = "warning"
    figure = validate(rack_figure(rows))
    bar = trace(figure, "bar")
    racked = [s for s in rows["servers"] if s["rack"]]
    assert len(bar["x"]) == len(racked) == 10
    placed = set(zip(bar["x"], bar["base"], strict=True))
    assert placed == {(s["rack"], s["rack_position"]) for s in racked}
    by_url = {c[0]: (c[1], h) for c, h in zip(bar["customdata"], bar["y"], strict=True)}
    assert by_url["/servers/4/"] == ("critical", 6)  # a DGX A100 is 6U
    assert by_url["/servers/5/"] == ("warning", 8)  # a DGX H100 is 8U
    assert by_url["/servers/6/"] == ("ok", 6)
    colours = dict(zip((c[0] for c in bar["customdata"]), bar["marker"]["color"], strict=True))
    assert colours["/servers/4/"] == PALETTE["critical"]["solid"]
    assert colours["/servers/6/"] == PALETTE["ok"]["solid"]
    legend = [t["name"] for t in figure["data"] if t.get("showlegend")]
    assert legend[:3] == ["critical finding open", "warning open", "no open finding"]
    assert legend[3:] == ["overlaps another chassis (drawn side by side)"]  # 8U set 4U apart
    assert figure["layout"]["xaxis"]["categoryarray"] == ["r001", "r002", "r003"]
    assert figure["layout"]["meta"]["links"] is True


@pytest.mark.parametrize(
    ("product", "units", "known"),
    [
        ("DGXH100", 8, True),
        ("DGX H200", 8, True),
        ("DGXA100 920-23687-2530-000", 6, True),
        ("AS -4125GS-TNRT", 4, True),
        ("SYS-821GE-TNHR", 8, True),
        ("PowerEdge R650", 1, True),
        ("PowerEdge R750xa", 2, True),
        ("PowerEdge XE9680", 6, True),
        ("Some Box 3000", 2, False),
        ("", 2, False),
    ],
)
def test_chassis_height_from_the_product_name(product, units, known):
    assert chassis_height_u(product) == (units, known)


def test_rack_view_without_racks_says_so():
    rows = fleet_rows(3)
    for s in rows["servers"]:
        s["rack"] = ""
    figure = validate(rack_figure(rows))
    assert figure["layout"]["meta"]["empty"] is True
    assert "rack" in figure["layout"]["annotations"][0]["text"]


def test_many_racked_servers_become_one_bar_per_rack():
    rows = fleet_rows(100, servers_per_rack=10, vm_hosts=0)
    figure = validate(rack_figure(rows, detail_limit=50))
    bar = trace(figure, "bar")
    assert len(bar["x"]) == 10
    assert sum(bar["y"]) == gpu_total(rows)
    assert bar["customdata"][0] == ["/servers/?rack=r001"]
    assert figure["layout"]["meta"]["aggregated"] is True


# Scale ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_fleet() -> FleetRows:
    """25,000 servers, 200,000 GPUs, 4 clusters, VMs, racks of 40, some in no scheduler."""
    rows = fleet_rows(
        25_000,
        servers_per_rack=40,
        clusters=("k8s-a", "k8s-b", "slurm-a", "slurm-b"),
        vm_hosts=20,
        vms_per_host=4,
        orphans=50,
        models=("DGXH100", "DGXA100", "HGX-B200", "PowerEdge XE9680"),
    )
    for row in rows["gpus"]:  # 20 hypervisors lent their 8 GPUs to their 4 VMs
        if row["model"] == "NVIDIA H100 PCIe":
            row["count"] = 2
    assert gpu_total(rows) == 200_000
    return rows


def test_fleet_figures_stay_under_the_mark_limit_at_25000_servers(big_fleet):
    hierarchy = validate(fleet_hierarchy_figure(big_fleet))
    items = sectors(hierarchy)
    assert len(items) <= MAX_MARKS
    assert sum(s["value"] for s in items if s["level"] == "gpu_model") == 200_000
    assert_branch_totals_hold(items)
    assert hierarchy["layout"]["meta"]["aggregated"] is True

    sankey = validate(server_node_map_figure(big_fleet))
    links = sankey_links(sankey)
    assert len(links) <= MAX_MARKS
    bound = sum(1 for n in big_fleet["nodes"] if n["server_id"])
    assert sum(v for a, b, v in links if to_cluster(b) and a != "no agent") == bound

    racks = validate(rack_figure(big_fleet))
    bar = trace(racks, "bar")
    assert len(bar["x"]) <= MAX_MARKS
    assert sum(bar["y"]) == 200_000 - 80 * 2  # VMs have no rack


def test_hierarchy_merges_groups_when_even_models_are_too_many(big_fleet):
    figure = validate(fleet_hierarchy_figure(big_fleet, max_sectors=20))
    items = sectors(figure)
    assert len(items) <= 20
    assert sum(s["value"] for s in items if s["level"] == "gpu_model") == 200_000


def test_rack_bars_are_capped_with_an_other_racks_bar():
    rows = fleet_rows(300, servers_per_rack=1, vm_hosts=0)
    bar = trace(validate(rack_figure(rows, detail_limit=10, max_marks=50)), "bar")
    assert len(bar["x"]) == 50
    assert bar["x"][-1] == "other racks (251)"
    assert sum(bar["y"]) == gpu_total(rows)


# Escaping in every figure ---------------------------------------------------------------


def evil_rows() -> FleetRows:
    rows = fleet_rows(
        4,
        hostname=EVIL_HOST + "{i}",
        gpu_model=EVIL_GPU,
        vm_hosts=1,
        vms_per_host=1,
        unscheduled_every=4,
        orphans=1,
        mig_every=1,
    )
    for row in rows["mig_devices"]:
        row["profile"] = "<u>1g.10gb</u>"
    for node in rows["nodes"]:
        node["name"] = "<a href=x>" + node["name"]
    return rows


def assert_escaped(figure: dict, *expected: str) -> None:
    text = strings(figure)
    for raw in (EVIL_HOST[:4], EVIL_GPU, "<u>", "<a href"):
        assert not [s for s in text if raw in s], raw
    for value in expected:
        assert any(esc(value) in s for s in text), value


@pytest.mark.parametrize(
    "build",
    [fleet_hierarchy_figure, server_node_map_figure, rack_figure],
    ids=["hierarchy", "server-node-map", "racks"],
)
def test_fleet_figures_escape_agent_and_scheduler_strings(build):
    figure = validate(build(evil_rows()))
    assert_escaped(figure, EVIL_HOST)
    if build is not server_node_map_figure:
        assert_escaped(figure, EVIL_GPU)
    if build is fleet_hierarchy_figure:
        assert_escaped(figure, "<u>1g.10gb</u>")


def test_aggregated_fleet_figures_escape_models():
    rows = fleet_rows(40, models=(EVIL_HOST,), gpu_model=EVIL_GPU, servers_per_rack=1)
    hierarchy = validate(fleet_hierarchy_figure(rows, node_limit=5))
    assert hierarchy["layout"]["meta"]["aggregated"] is True
    assert_escaped(hierarchy, EVIL_HOST, EVIL_GPU)
    sankey = validate(server_node_map_figure(rows, detail_limit=5))
    assert sankey["layout"]["meta"]["aggregated"] is True
    assert_escaped(sankey, EVIL_HOST)
    racks = validate(rack_figure(rows, detail_limit=5))
    assert racks["layout"]["meta"]["aggregated"] is True
    assert_escaped(racks, EVIL_GPU)


def test_server_figures_escape_gpu_nic_and_link_names():
    data = interconnect(4, name=EVIL_GPU, nic_name=EVIL_HOST + "{n}", gpu_class="<i>NV")
    for figure in (interconnect_matrix_figure(data), nvlink_graph_figure(data)):
        assert_escaped(validate(figure), EVIL_HOST)
        text = strings(figure)
        assert not [s for s in text if "<i>" in s]
    assert_escaped(interconnect_matrix_figure(data), EVIL_GPU, "<i>NV")
    assert_escaped(nvlink_graph_figure(interconnect(4, name=EVIL_GPU)), EVIL_GPU)
    mig = mig_layout_figure([mig_gpu(0, [("<u>1g.10gb</u>", 1, 0, 0, 1)], name=EVIL_GPU)])
    assert_escaped(validate(mig), EVIL_GPU, "<u>1g.10gb</u>")
