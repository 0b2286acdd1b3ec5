"""The simulated fleet's InfiniBand fabric: ibnetdiscover text built from the agents' own
reports, read back by the fabric's parser with every GUID, LID and rail where they belong."""

from __future__ import annotations

from fabric.parsers import CA, SWITCH, parse_fabric
from simulator.fabric import host_ports, rail_fabric


def report(hostname: str, guids: list[str], *, speed: int = 400000) -> dict:
    nics = [
        {"name": "eno1", "kind": "ethernet", "node_guid": None},
        {"name": "mlx5_0", "kind": "ethernet", "node_guid": "b83fd203000000ff"},  # RoCE
    ]
    nics += [
        {
            "name": f"mlx5_{k + 1}",
            "kind": "infiniband",
            "node_guid": guid,
            "lid": 0x100 + k,
            "speed_mbps": speed,
        }
        for k, guid in enumerate(guids)
    ]
    return {"host": {"hostname": hostname}, "nics": nics}


def test_nic_k_of_every_server_lands_on_leaf_k_under_two_spines():
    reports = [
        report("dgx-01", [f"0000000000000a{k:02x}" for k in range(8)]),
        report("dgx-02", [f"0000000000000b{k:02x}" for k in range(8)], speed=200000),
        report("login-01", []),  # no InfiniBand: not in the fabric
    ]
    discovery = parse_fabric(rail_fabric(reports).encode())
    switches = {g: n for g, n in discovery.nodes.items() if n.kind == SWITCH}
    adapters = {g: n for g, n in discovery.nodes.items() if n.kind == CA}
    names = {n.description.split(";")[1].split(":")[0] for n in switches.values()}
    assert names == {f"ib-leaf-r{k}" for k in range(1, 9)} | {"ib-spine-1", "ib-spine-2"}
    assert len(adapters) == 16
    assert adapters["0000000000000a03"].description == "dgx-01 mlx5_4"
    by_guid = discovery.nodes
    for link in discovery.links:
        assert link.up
        if link.b_guid in adapters:
            rail = int(by_guid[link.a_guid].description.split("-r")[1].split(":")[0])
            assert int(link.b_guid[-2:], 16) == rail - 1  # NIC k on the rail-k leaf
            assert link.speed == ("HDR" if link.b_guid[-3] == "b" else "NDR")
    uplinks = [link for link in discovery.links if link.b_guid in switches]
    assert len(uplinks) == 8 * 2  # as many uplinks per leaf as servers: non-blocking


def test_only_infiniband_nics_with_a_node_guid_count_in_guid_order_of_names():
    ports = host_ports([report("dgx-01", ["00000000000000a1", "00000000000000a2"])])
    assert [(p.nic, p.guid, p.lid, p.rate) for p in ports[0]] == [
        ("mlx5_1", 0xA1, 0x100, "4xNDR"),
        ("mlx5_2", 0xA2, 0x101, "4xNDR"),
    ]
