"""Synthetic `ibnetdiscover` output of a rail-optimised fat tree, for benchmarks, tests and
the demo fleet. Pure: parameters in, the text a real ibnetdiscover would print out.

Layout: servers in scalable units of `servers_per_leaf`; NIC k of every server of a unit on
that unit's rail-k leaf (`leaf-su0001-r1`); each leaf's `leaf_uplinks` cables spread over
the spines of its pod (`pods_of` units per pod); each spine's `spine_uplinks` cables spread
over the cores, when there are cores (three tiers), else the spines are the top (two).
Names: servers `host_format` (`gpu00001`), NICs `mlx5_<k-1>` in their node descriptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil

SWITCH_BASE = 0x0002C90300000000
CA_BASE = 0xE09D730300000000
RATE = "4xNDR"


@dataclass(slots=True)
class _Switch:
    guid: int
    name: str
    ports: int
    lid: int
    links: dict[int, tuple[str, int, int, str, int, int | None]] = field(default_factory=dict)
    next_port: int = 1


@dataclass(frozen=True, slots=True)
class SyntheticFabric:
    """The text and what it was built from (tests compare what is read with these)."""

    text: str
    servers: list[str]
    leaves: dict[tuple[int, int], str]  # (unit, rail) -> leaf name
    spines: list[str]
    cores: list[str]
    host_leaf: dict[tuple[str, int], str]  # (server, rail) -> leaf name


def synthetic_fabric(
    *,
    servers: int,
    rails: int = 8,
    servers_per_leaf: int = 32,
    leaf_uplinks: int | None = None,
    pods_of: int | None = None,
    spines_per_pod: int = 2,
    cores: int = 0,
    spine_uplinks: int | None = None,
    rate: str = RATE,
    host_format: str = "gpu{:05d}",
    slow: dict[tuple[str, int], str] | None = None,
) -> SyntheticFabric:
    """Build the fabric and print it as ibnetdiscover would.

    `leaf_uplinks` defaults to `servers_per_leaf` (non-blocking); `pods_of` None puts every
    unit in one pod; `slow` maps (server, rail) to another rate for that NIC's cable (an HDR
    link on an NDR fabric).
    """
    slow = slow or {}
    units = ceil(servers / servers_per_leaf)
    pods_of = pods_of or units
    pods = ceil(units / pods_of)
    leaf_uplinks = servers_per_leaf if leaf_uplinks is None else leaf_uplinks
    spine_down = ceil(pods_of * rails * leaf_uplinks / spines_per_pod)
    spine_uplinks = (spine_down if cores else 0) if spine_uplinks is None else spine_uplinks
    lid = iter(range(1, 1 << 30))
    switches: list[_Switch] = []

    def switch(name: str, ports: int) -> _Switch:
        made = _Switch(SWITCH_BASE + len(switches) + 1, name, ports, next(lid))
        switches.append(made)
        return made

    leaves: dict[tuple[int, int], _Switch] = {}
    for unit in range(units):
        for rail in range(rails):
            leaf = switch(f"leaf-su{unit + 1:04d}-r{rail + 1}", servers_per_leaf + leaf_uplinks)
            leaf.next_port = servers_per_leaf + 1  # ports 1..servers_per_leaf face servers
            leaves[(unit, rail)] = leaf
    spines = {
        (pod, i): switch(f"spine-p{pod + 1:03d}-{i + 1:02d}", spine_down + spine_uplinks)
        for pod in range(pods)
        for i in range(spines_per_pod)
    }
    core_list = [
        switch(f"core-{i + 1:04d}", ceil(len(spines) * spine_uplinks / cores) + 1)
        for i in range(cores)
    ]

    _rates: dict[tuple[int, int], str] = {}

    def cable(a: _Switch, b: _Switch, speed: str = rate) -> None:
        pa, pb = a.next_port, b.next_port
        a.next_port, b.next_port = pa + 1, pb + 1
        a.links[pa] = ("S", b.guid, pb, _switch_description(b.name), b.lid, None)
        b.links[pb] = ("S", a.guid, pa, _switch_description(a.name), a.lid, None)
        _rates[(a.guid, pa)] = _rates[(b.guid, pb)] = speed

    for (unit, _rail), leaf in leaves.items():
        pod = unit // pods_of
        for n in range(leaf_uplinks):
            cable(leaf, spines[(pod, n % spines_per_pod)])
    if cores:
        for k, spine in enumerate(spines.values()):
            for n in range(spine_uplinks):
                cable(spine, core_list[(k * spine_uplinks + n) % cores])

    names = [host_format.format(i + 1) for i in range(servers)]
    ca_lines: list[str] = []
    host_leaf: dict[tuple[str, int], str] = {}
    guid = CA_BASE
    for index, host in enumerate(names):
        unit = index // servers_per_leaf
        for rail in range(rails):
            guid += 1
            leaf = leaves[(unit, rail)]
            port = index % servers_per_leaf + 1
            ca_lid = next(lid)
            description = f"{host} mlx5_{rail}"
            speed = slow.get((host, rail + 1), rate)
            leaf.links[port] = ("H", guid, 1, description, ca_lid, guid)
            _rates[(leaf.guid, port)] = speed
            host_leaf[(host, rail + 1)] = leaf.name
            ca_lines.append(
                f"\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x{guid:x}\ncaguid=0x{guid:x}\n"
                f'Ca\t1 "H-{guid:016x}"\t\t# "{description}"\n'
                f'[1]({guid:x}) \t"S-{leaf.guid:016x}"[{port}]\t\t# lid {ca_lid} lmc 0 '
                f'"{_switch_description(leaf.name)}" lid {leaf.lid} {speed}\n'
            )

    out = [
        "#\n# Topology file: generated by fabric.synthetic\n#\n"
        f"# Initiated from node {CA_BASE + 1:016x} port {CA_BASE + 1:016x}\n"
    ]
    for sw in switches:
        out.append(
            f"\nvendid=0x2c9\ndevid=0xd2f2\nsysimgguid=0x{sw.guid:x}\n"
            f"switchguid=0x{sw.guid:x}({sw.guid:x})\n"
            f'Switch\t{sw.ports} "S-{sw.guid:016x}"\t\t# "{_switch_description(sw.name)}" '
            f"enhanced port 0 lid {sw.lid} lmc 0\n"
        )
        for port in sorted(sw.links):
            kind, peer, peer_port, description, peer_lid, port_guid = sw.links[port]
            far_guid = f"({port_guid:x}) " if port_guid else ""
            out.append(
                f'[{port}]\t"{kind}-{peer:016x}"[{peer_port}]{far_guid}\t\t# "{description}" '
                f"lid {peer_lid} {_rates[(sw.guid, port)]}\n"
            )
    out.extend(ca_lines)
    return SyntheticFabric(
        text="".join(out),
        servers=names,
        leaves={key: leaf.name for key, leaf in leaves.items()},
        spines=[s.name for s in spines.values()],
        cores=[c.name for c in core_list],
        host_leaf=host_leaf,
    )


def _switch_description(name: str) -> str:
    """As NVIDIA Quantum switches describe themselves: `MF0;<name>:MQM9700/U1`."""
    return f"MF0;{name}:MQM9700/U1"
