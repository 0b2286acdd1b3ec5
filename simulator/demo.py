"""The demo fleet, declared: each server's profile, rack position and scheduler nodes.

`make run` shows this fleet. It is a data structure, not a sequence of steps, so whoever
loads it (the backend's demo service) can post every report and every snapshot before the
fleet is reconciled once, and a newcomer sees only the findings declared here on purpose:
dgx-h100-10 has a GPU fallen off the bus (below its DGX H100 profile, a GPU not in NVML),
gpu-b02 is a Kubernetes node whose server runs no agent, dgx-a100-01 has a GPU with MIG
pending a reset, gpu-l40s-03 is drained for a fan replacement.

Its InfiniBand fabric (`demo_fabric`) is rail-optimised: a leaf per rail, two spines, every
DGX's NIC k on leaf k; dgx-a100-01's ConnectX-6 links run at HDR on the NDR fabric. The
L40S servers' RoCE NICs are on two Ethernet rail leaves, which their agents hear over LLDP
(`roce-leaf-r1`, `roce-leaf-r2`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from .fabric import rail_fabric
from .fleet import SimulatedServer, fleet
from .schedulers import (
    DemoNode,
    Entry,
    Pod,
    Snapshot,
    kubernetes_nodes,
    kubernetes_pods,
    slurm_nodes,
)

K8S_CLUSTER, SLURM_CLUSTER = "prod-k8s", "hpc-slurm"
DEMO_FABRIC = "demo-ib"


@dataclass(frozen=True)
class DemoServer:
    """A server of the demo: the simulated profile it runs, where it stands (people set the
    rack; agents cannot know it) and the scheduler nodes that bind to it."""

    hostname: str
    profile: str
    rack: str | None = None  # None: a VM, in no rack of its own
    rack_position: int | None = None  # U from the bottom
    nodes: tuple[DemoNode, ...] = ()


def _k8s(*pods: Pod) -> DemoNode:
    return DemoNode(K8S_CLUSTER, pods=pods)


def _slurm(state: str = "IDLE", *, reason: str = "", gpus_used: int = 0) -> DemoNode:
    return DemoNode(SLURM_CLUSTER, state=state, reason=reason, gpus_used=gpus_used)


DEMO_FLEET: tuple[DemoServer, ...] = (
    DemoServer("dgx-h100-01", "h100", "rack-01", 2, (_k8s(Pod("llm-train-0", 8)),)),
    DemoServer("dgx-h100-02", "h100", "rack-01", 10, (_k8s(Pod("llm-train-1", 8)),)),
    DemoServer("dgx-h100-03", "h100", "rack-01", 18, (_k8s(Pod("notebook-ana", 1)),)),
    DemoServer("dgx-h100-04", "h100", "rack-01", 26, (_k8s(),)),
    DemoServer("dgx-h100-05", "h100", "rack-02", 2, (_k8s(),)),
    DemoServer("dgx-h100-06", "h100", "rack-02", 10, (_k8s(),)),
    DemoServer("dgx-h100-07", "h100", "rack-02", 18, (_k8s(),)),
    DemoServer("dgx-h100-08", "h100", "rack-02", 26, (_k8s(),)),
    DemoServer("dgx-h100-09", "h100", "rack-03", 2, (_k8s(), _slurm("MIXED", gpus_used=4))),
    DemoServer("dgx-h100-10", "h100-lost", "rack-03", 10, (_slurm(),)),
    DemoServer("dgx-a100-01", "a100-mig", "rack-03", 18, (_slurm(),)),
    DemoServer("kvm-01", "kvm-host", "rack-03", 24),  # its GPUs are its VMs'
    DemoServer("gpu-l40s-01", "l40s", "rack-04", 10, (_slurm(),)),
    DemoServer("gpu-l40s-02", "l40s", "rack-04", 14, (_slurm(),)),
    DemoServer(
        "gpu-l40s-03",
        "l40s",
        "rack-04",
        18,
        (_slurm("IDLE+DRAIN", reason="fan replacement [admin@2026-11-29T17:02:11]"),),
    ),
    DemoServer("login-01", "cpu-only", "rack-04", 22),
    DemoServer("gpu-vm-01", "kvm-vm", nodes=(_k8s(),)),
    DemoServer("gpu-vm-02", "kvm-vm", nodes=(_k8s(),)),
)


def demo_machines(seed: int | str = 0) -> list[tuple[DemoServer, SimulatedServer]]:
    """Each declared server with its simulated machine, in declaration order.

    The machines come from the fleet simulator (VMs wired to their KVM host), so identities
    are reproducible from the seed and the same as any fleet of that mix.
    """
    counts = Counter(server.profile for server in DEMO_FLEET)
    built = {machine.hostname: machine for machine in fleet(dict(counts), seed=seed)}
    declared = [server.hostname for server in DEMO_FLEET]
    if sorted(built) != sorted(declared):
        raise ValueError(f"the demo declares {declared}; the simulator named {sorted(built)}")
    roce = [server.hostname for server in DEMO_FLEET if server.profile == "l40s"]
    for number, hostname in enumerate(roce, start=1):
        _roce_lldp(built[hostname], number)
    return [(server, built[server.hostname]) for server in DEMO_FLEET]


def _roce_lldp(server: SimulatedServer, number: int) -> None:
    """What lldpd hears on a server's RoCE NICs: NIC k on rail leaf k, port swp<number>."""
    machine = server.machine
    rdma = sorted(
        (nic for nic in machine.nics if nic.rdma and nic.kind == "ethernet" and nic.netdev),
        key=lambda nic: nic.name,
    )
    for rail, nic in enumerate(rdma, start=1):
        machine.lldp[str(nic.netdev)] = (
            f"roce-leaf-r{rail}",
            f"1c:34:da:5e:60:{rail:02x}",
            f"swp{number}",
            f"{machine.hostname} {nic.name}",
            f"10.50.255.{rail}",
        )


def demo_servers(seed: int | str = 0) -> list[SimulatedServer]:
    """The demo fleet: 10 DGX-class H100 servers (dgx-h100-10 has a GPU fallen off the
    bus), a DGX A100 in MIG mode, a KVM host with two GPU VMs, three L40S PCIe servers and a
    CPU-only login node."""
    return [machine for _, machine in demo_machines(seed)]


def demo_fleet(seed: int | str = 0) -> list[dict[str, Any]]:
    """The demo fleet's reports, ready to POST (one per server, one token each)."""
    return [server.report() for server in demo_servers(seed)]


def demo_snapshots(reports: dict[str, dict[str, Any]]) -> list[Snapshot]:
    """Both clusters' snapshots for the demo servers' reports (by hostname): Kubernetes nodes
    and pods as `kubectl` prints them, Slurm nodes as `scontrol show node` does."""

    def entries(cluster: str) -> list[Entry]:
        return [
            (reports[server.hostname], node)
            for server in DEMO_FLEET
            for node in server.nodes
            if node.cluster == cluster
        ]

    k8s, slurm = entries(K8S_CLUSTER), entries(SLURM_CLUSTER)
    return [
        Snapshot(K8S_CLUSTER, kubernetes_nodes(k8s), "application/json"),
        Snapshot(K8S_CLUSTER, kubernetes_pods(k8s), "application/json"),
        Snapshot(SLURM_CLUSTER, slurm_nodes(slurm), "text/plain"),
    ]


def demo_fabric(reports: dict[str, dict[str, Any]]) -> str:
    """The demo's InfiniBand fabric as `ibnetdiscover` prints it, from the servers' reports
    (by hostname) in declaration order, so every GUID and LID is the one its agent reports."""
    return rail_fabric(reports[server.hostname] for server in DEMO_FLEET)
