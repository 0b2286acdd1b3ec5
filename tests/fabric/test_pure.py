"""The pure functions without a database: tiers, rails, leaf groups, bandwidth, bindings,
Slurm and Kubernetes exports, and every finding rule on plain facts."""

from __future__ import annotations

import pytest

from fabric import binding, graph, rules
from fabric.binding import AdapterIdentity, bind_adapter, server_name_index
from fabric.exports import (
    SchedulerTree,
    TreeFacts,
    kubernetes_labels,
    parse_topology_conf,
    safe_switch_name,
    scheduler_tree,
    slurm_topology_conf,
)
from fabric.parsers import FabricFormatError, parse_fabric
from fabric.synthetic import synthetic_fabric
from findings.choices import FindingType, Severity


def _switch_graph(text: str):
    found = parse_fabric(text)
    switches = {n.guid: n.description.split(";")[-1].split(":")[0] for n in found.switches}
    pairs = [(c.a_guid, c.b_guid) for c in found.links if c.b_guid in switches]
    ports = [
        graph.HostPort(
            adapter=c.b_guid,
            host=binding.host_name_of(found.nodes[c.b_guid].description) or None,
            nic=binding.nic_label_of(found.nodes[c.b_guid].description),
            switch=c.a_guid,
            gbps=c.gbps,
        )
        for c in found.links
        if c.b_guid
        and c.b_guid not in switches
        and "Aggregation" not in found.nodes[c.b_guid].description
    ]
    hosts = {}
    for port in ports:
        hosts[port.switch] = hosts.get(port.switch, 0) + 1
    return switches, pairs, ports, hosts


# -- tiers ------------------------------------------------------------------------------


def test_three_tiers_of_a_synthetic_fat_tree():
    built = synthetic_fabric(
        servers=16, rails=2, servers_per_leaf=4, pods_of=2, spines_per_pod=2, cores=2
    )
    names, pairs, _, hosts = _switch_graph(built.text)
    tiers = graph.infer_tiers(names, pairs, hosts)
    by_name = {names[k]: t for k, t in tiers.items()}

    assert {by_name[n] for n in built.leaves.values()} == {1}
    assert {by_name[n] for n in built.spines} == {2}
    assert {by_name[n] for n in built.cores} == {3}


def test_a_spine_with_a_stray_host_stays_a_spine():
    # leaves L1, L2 with 8 hosts each; spine S with one management host
    tiers = graph.infer_tiers(
        ["L1", "L2", "S"], [("L1", "S"), ("L2", "S")], {"L1": 8, "L2": 8, "S": 1}
    )
    assert tiers == {"L1": 1, "L2": 1, "S": 2}


def test_two_leaves_cabled_together_are_both_leaves():
    assert graph.infer_tiers(["A", "B"], [("A", "B")], {"A": 4, "B": 4}) == {"A": 1, "B": 1}


def test_overrides_are_kept_and_unreached_switches_have_no_tier():
    tiers = graph.infer_tiers(
        ["L", "S", "C", "X"], [("L", "S"), ("S", "C")], {"L": 2}, overrides={"S": 3}
    )
    assert tiers == {"L": 1, "S": 3, "C": 4, "X": None}


def test_superpod_tiers(superpod):
    names, pairs, _, hosts = _switch_graph(superpod)
    tiers = graph.infer_tiers(names, pairs, hosts)
    assert all(tiers[k] == (1 if "IBLEAF" in n else 2) for k, n in names.items())


# -- rails and groups ---------------------------------------------------------------------


def test_superpod_rails_line_up_both_naming_schemes(superpod):
    names, pairs, ports, hosts = _switch_graph(superpod)
    leaves = {k for k, t in graph.infer_tiers(names, pairs, hosts).items() if t == 1}
    layout = graph.detect_rails(ports, leaves)

    assert layout.rail_optimised
    assert layout.rail_labels == {
        1: ["HCA-1", "mlx5_0"],
        2: ["HCA-2", "mlx5_1"],
        3: ["HCA-5", "mlx5_4"],
        4: ["HCA-6", "mlx5_5"],
    }
    for leaf, rail in layout.leaf_rail.items():
        assert names[leaf].split("-")[3] == f"0{rail}"  # IBLEAF-<rail>-<unit>
    assert len(layout.groups) == 8
    for group in layout.groups.values():
        assert len({names[leaf].split("-")[4] for leaf in group}) == 1  # one unit per group


def test_a_host_missing_one_nic_does_not_shift_the_others():
    ports = [
        graph.HostPort("a1", "h1", "HCA-1", "L1"),
        graph.HostPort("a2", "h1", "HCA-2", "L2"),
        graph.HostPort("a3", "h1", "HCA-3", "L3"),
        graph.HostPort("b1", "h2", "HCA-1", "L1"),
        graph.HostPort("b3", "h2", "HCA-3", "L3"),  # h2 has no HCA-2
    ]
    layout = graph.detect_rails(ports, {"L1", "L2", "L3"})
    assert layout.adapter_rail["b3"] == 3
    assert layout.leaf_rail == {"L1": 1, "L2": 2, "L3": 3}


def test_a_nic_is_on_its_leafs_rail_whatever_its_name_says_or_without_one():
    members = [
        graph.HostPort(f"{h}{k}", h, f"HCA-{k}", f"L{k}") for h in ("h1", "h2") for k in (1, 2)
    ]
    others = [
        graph.HostPort("u1", "ufm", "mlx5_0", "L2"),  # its name says rail 1, its cable rail 2
        graph.HostPort("u2", "ufm", "mlx5_1", "L1"),
        graph.HostPort("x1", None, "", "L1"),  # no description: no host, no label
        graph.HostPort("s1", "store", "mlx5_0", "L9"),  # a leaf with no rail
        graph.HostPort("s2", "store", "mlx5_1", "L9"),
    ]
    layout = graph.detect_rails(members + others, {"L1", "L2", "L9"})
    assert layout.leaf_rail == {"L1": 1, "L2": 2}
    assert layout.adapter_rail["u1"] == 2 and layout.nic_rail["u1"] == 1
    assert layout.adapter_rail["u2"] == 1 and layout.nic_rail["u2"] == 2
    assert layout.adapter_rail["x1"] == 1 and "x1" not in layout.nic_rail
    assert layout.adapter_rail["s2"] == layout.nic_rail["s2"] == 2  # no leaf rail: the name's
    assert all(layout.adapter_rail[p.adapter] == layout.nic_rail[p.adapter] for p in members)


def test_swapped_cables_keep_the_rail_their_names_give_apart_from_their_leaves():
    ports = [
        graph.HostPort(f"{h}{k}", h, f"HCA-{k}", f"L{k}")
        for h in ("h1", "h2", "h3")
        for k in (1, 2)
    ]
    ports[-2:] = [
        graph.HostPort("h31", "h3", "HCA-1", "L2"),
        graph.HostPort("h32", "h3", "HCA-2", "L1"),
    ]
    layout = graph.detect_rails(ports, {"L1", "L2"})
    assert (layout.nic_rail["h31"], layout.adapter_rail["h31"]) == (1, 2)
    assert (layout.nic_rail["h32"], layout.adapter_rail["h32"]) == (2, 1)


def test_single_nic_hosts_make_no_rails():
    ports = [graph.HostPort(f"a{i}", f"h{i}", "mlx5_0", "L1") for i in range(4)]
    layout = graph.detect_rails(ports, {"L1"})
    assert not layout.rail_optimised and layout.leaf_rail == {}
    assert layout.groups == {1: ["L1"]}


# -- bandwidth ----------------------------------------------------------------------------


def test_host_bandwidth_and_per_gpu():
    ports = [
        graph.HostPort("a", "h1", "mlx5_0", "L1", 400.0),
        graph.HostPort("b", "h1", "mlx5_1", "L2", 400.0),
        graph.HostPort("c", "h2", "mlx5_0", "L1", 200.0),
    ]
    rows = {row.host: row for row in graph.host_bandwidth(ports, {"h1": 8})}
    assert (rows["h1"].nics, rows["h1"].gbps, rows["h1"].gbps_per_gpu) == (2, 800.0, 100.0)
    assert rows["h1"].nics_per_gpu == 0.25
    assert rows["h2"].gbps_per_gpu is None  # no GPU count known


def test_oversubscription_of_a_leaf():
    loads = graph.switch_loads({"L": 1, "S": 2}, [("L", "S", 400.0)], [("L", 400.0), ("L", 400.0)])
    assert (loads["L"].down_gbps, loads["L"].up_gbps, loads["L"].ratio) == (800.0, 400.0, 2.0)
    assert loads["S"].ratio is None


def test_tier_domains_for_kubernetes_labels():
    tiers = {"L1": 1, "L2": 1, "L3": 1, "S1": 2, "S2": 2, "C": 3}
    links = [("L1", "S1"), ("L2", "S1"), ("L3", "S2"), ("S1", "C"), ("S2", "C")]
    domains = graph.tier_domains(tiers, links, {"L1": 1, "L2": 2, "L3": 3})
    assert domains == {2: {1: "S1", 2: "S1", 3: "S2"}, 3: {1: "C", 2: "C", 3: "C"}}
    labels = kubernetes_labels(
        {"gpu1": "su1", "gpu9": "su3"}, {"gpu1": {2: "S1", 3: "C"}, "gpu9": {2: "S2", 3: "C"}}
    )
    assert labels["gpu1"] == {
        "network.topology.nvidia.com/leaf": "su1",
        "network.topology.nvidia.com/spine": "S1",
        "network.topology.nvidia.com/core": "C",
    }


def test_label_values_are_valid_kubernetes_values():
    labels = kubernetes_labels({"h": "MF0;A09 leaf/01:" + "x" * 80}, {})
    value = labels["h"]["network.topology.nvidia.com/leaf"]
    assert len(value) <= 63 and value.replace("-", "").replace(".", "").replace("_", "").isalnum()


# -- binding ------------------------------------------------------------------------------


def test_binding_order_guid_then_map_then_description():
    index = server_name_index([(1, "dgx-01", ""), (2, "dgx-02", "dgx-02.lab"), (3, "x", "")])
    nic = AdapterIdentity("aa", ("ab",), "dgx-01 mlx5_0")

    assert bind_adapter(nic, servers_by_guid={"ab": 3}, mapped_names={}, servers_by_name=index) == (
        binding.Binding("dgx-01", 3, "guid")
    )
    by_map = bind_adapter(
        nic, servers_by_guid={}, mapped_names={"aa": "dgx-02 hca0"}, servers_by_name=index
    )
    assert by_map == binding.Binding("dgx-02", 2, "node_name_map")
    assert bind_adapter(nic, servers_by_guid={}, mapped_names={}, servers_by_name=index) == (
        binding.Binding("dgx-01", 1, "description")
    )


def test_what_cannot_be_told_stays_unbound():
    index = server_name_index([(1, "ubuntu", ""), (2, "UBUNTU", "ubuntu.b.example")])
    assert "ubuntu" not in index  # two servers, one name
    unset = AdapterIdentity("aa", (), "MT4129 ConnectX7   Mellanox Technologies")
    found = bind_adapter(unset, servers_by_guid={}, mapped_names={}, servers_by_name=index)
    assert found == binding.Binding("", None, "")
    sharp = AdapterIdentity("bb", (), "dgx-01 x", role=binding.AGGREGATION)
    assert bind_adapter(
        sharp, servers_by_guid={"bb": 1}, mapped_names={}, servers_by_name={"dgx-01": 1}
    ) == binding.Binding("", None, "")


@pytest.mark.parametrize(
    ("description", "host", "nic"),
    [
        ("a08-p1-dgx-04-c01 mlx5_5", "a08-p1-dgx-04-c01", "mlx5_5"),
        ("o0001 HCA-1", "o0001", "HCA-1"),
        ("MT4129 ConnectX7   Mellanox Technologies", "", ""),
        ("Mellanox Technologies Aggregation Node", "", ""),
        ("", "", ""),
        ("<script> x", "", ""),
    ],
)
def test_host_and_nic_from_descriptions(description, host, nic):
    assert (binding.host_name_of(description), binding.nic_label_of(description)) == (host, nic)


def test_switch_names():
    assert binding.switch_name_of("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1") == "A09-P1-IBLEAF-04-04"
    assert binding.switch_name_of("ib-i1l1s01") == "ib-i1l1s01"
    assert binding.switch_name_of("MF0;x:y", "leaf-7") == "leaf-7"
    assert safe_switch_name("leaf 1;#x") == "leaf_1_x"


# -- Slurm ---------------------------------------------------------------------------------


def test_rail_leaves_become_one_scheduler_switch_and_others_keep_their_names():
    facts = TreeFacts(
        switches={"l1": ("leaf-a", 1), "l2": ("leaf-b", 1), "l3": ("leaf-c", 1), "s": ("spine", 2)},
        switch_links=[("l1", "s"), ("l2", "s"), ("l3", "s")],
        leaf_hosts={"l1": {"h1", "h2"}, "l2": {"h1", "h2"}, "l3": {"h3", "hx"}},
        leaf_group={"l1": 1, "l2": 1, "l3": 2},
    )
    tree, notes = scheduler_tree(facts, {"h1": "n1", "h2": "n2", "h3": "n3"})

    assert tree.nodes == {"su1": ["n1", "n2"], "leaf-c": ["n3"]}  # hx has no name: left out
    assert tree.children == {"spine": ["leaf-c", "su1"]}
    assert notes == {"su1": ["leaf-a", "leaf-b"]}
    text = slurm_topology_conf(tree, notes, "header")
    assert text.splitlines() == [
        "# header",
        "# su1: leaves leaf-a, leaf-b",
        "SwitchName=su1 Nodes=n[1-2]",
        "SwitchName=leaf-c Nodes=n3",
        "SwitchName=spine Switches=leaf-c,su1",
    ]
    assert parse_topology_conf(text).nodes == tree.nodes


def test_reading_a_topology_conf():
    tree = parse_topology_conf(
        "# comment\nswitchname=s1 nodes=tux[0-3,12] LinkSpeed=100  # trailing\n"
        "SwitchName=s2 Nodes=tux[4-5]\nSwitchName=top \\\n  Switches=s[1-2]\n"
    )
    assert tree.nodes == {"s1": ["tux0", "tux1", "tux2", "tux3", "tux12"], "s2": ["tux4", "tux5"]}
    assert tree.children == {"top": ["s1", "s2"]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SwitchName=s1 Nodes=n[1-100000000]\n", "line 1: bad hostlist"),
        ("SwitchName=s1 Nodes=n1\nSwitchName=s1 Nodes=n2\n", "defined twice"),
        ("Nodes=n1\n", "SwitchName="),
        ("SwitchName=s1 Colour=red\n", "'Colour=red' is not"),
        ("BlockName=b1 Nodes=n[1-4]\n", "block topology"),
        ("SwitchName=top Switches=s1\n", "no switch with Nodes="),
    ],
)
def test_bad_topology_conf_names_the_line(text, message):
    with pytest.raises(FabricFormatError, match=message):
        parse_topology_conf(text)


# -- rules ------------------------------------------------------------------------------------


def _link(key, width="4x", speed="NDR", gbps=400.0, between=False, server=None):
    return rules.LinkFact(key, "leaf-1", 1, "dgx-01", 1, width, speed, gbps, between, server)


def test_rule_slower_and_narrower_cables():
    links = [_link(f"k{i}") for i in range(5)]
    links += [_link("hdr", speed="HDR", gbps=200.0, server=7), _link("1x", width="1x", gbps=100.0)]
    links += [_link("s1", between=True), _link("unknown", speed="???", gbps=None)]
    found = {f.subject: f for f in rules.degraded_links("f", links)}

    assert set(found) == {"fabric:f/link:hdr", "fabric:f/link:1x"}
    assert found["fabric:f/link:hdr"].server_id == 7
    assert (
        "4xHDR (200 Gb/s), slower than the 4xNDR (400 Gb/s)" in found["fabric:f/link:hdr"].message
    )
    assert "narrower" in found["fabric:f/link:1x"].message


def test_rule_no_verdict_without_a_clear_majority():
    links = [_link("a"), _link("b", speed="HDR", gbps=200.0)]
    assert rules.degraded_links("f", links) == []


def test_rule_port_gone():
    (found,) = rules.ports_gone("f", [_link("k", server=3)])
    assert found.type == FindingType.FABRIC_PORT_GONE and found.server_id == 3
    expected = "leaf-1 port 1 to dgx-01 port 1 was up in the previous snapshot and is gone"
    assert found.message == expected + " from the last"


def test_rule_wrong_rail_judges_rail_members_only():
    swapped = [
        rules.RailFact("a1", "dgx-1", "HCA-1", 1, "leaf-r1", 1),
        rules.RailFact("a2", "dgx-1", "HCA-2", 2, "leaf-r3", 3, server_id=5),
        rules.RailFact("a3", "dgx-1", "HCA-3", 3, "leaf-r3", 3),
    ]
    management = [
        rules.RailFact("m1", "ufm", "mlx5_0", 1, "leaf-r3", 3),
        rules.RailFact("m2", "ufm", "mlx5_1", 2, "leaf-r4", 4),
    ]
    (found,) = rules.wrong_rail("f", swapped + management)
    assert found.server_id == 5
    assert (
        found.message == "dgx-1 HCA-2 belongs on rail 2 but is cabled to leaf-r3, a leaf of rail 3"
    )


def test_rule_scheduler_topology_mismatch():
    discovered = SchedulerTree(nodes={"su1": ["n1", "n2"], "su2": ["n3", "n4"]})
    same = SchedulerTree(nodes={"a": ["n1", "n2"], "b": ["n3", "n4"]})
    assert rules.scheduler_topology_mismatch("c", same, discovered) == []
    told = SchedulerTree(nodes={"a": ["n1", "n3"], "b": ["n2", "n9"]})
    found = {f.subject: f for f in rules.scheduler_topology_mismatch("c", told, discovered)}
    assert set(found) == {
        "cluster:c/topology/switch:a",
        "cluster:c/topology/leaf:su1",
        "cluster:c/topology/missing",
        "cluster:c/topology/unknown",
    }
    assert found["cluster:c/topology/missing"].details == {"nodes": ["n4"]}
    assert found["cluster:c/topology/unknown"].severity == Severity.INFO


def test_rule_gpu_server_absent_from_its_peers_fabric():
    servers = [rules.ServerFact(i, f"dgx-{i}", "8 x H100", on_fabric=i != 3) for i in range(1, 5)]
    servers.append(rules.ServerFact(9, "l40s-1", "4 x L40S", on_fabric=False))
    (found,) = rules.servers_absent("f", servers)
    assert (found.server_id, found.type) == (3, FindingType.FABRIC_SERVER_ABSENT)
    assert "where 3 of its 3 peers (8 x H100) are" in found.message


def test_rule_unbalanced_server():
    servers = [
        rules.ServerFact(i, f"dgx-{i}", "8 x H100", True, gbps_per_gpu=400.0) for i in range(4)
    ]
    servers.append(rules.ServerFact(9, "dgx-9", "8 x H100", True, gbps_per_gpu=100.0))
    (found,) = rules.servers_unbalanced("f", servers)
    assert found.server_id == 9
    assert found.message == "dgx-9 has 100 Gb/s of network per GPU; its peers (8 x H100) have 400"
