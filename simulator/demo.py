"""The demo fleet, declared: each server's profile, rack position and scheduler nodes.

`make run` shows this fleet. It is a data structure, not a sequence of steps, so whoever
loads it (the backend's demo service) can post every report and every snapshot before the
fleet is reconciled once, and a newcomer sees only the findings declared here on purpose:
dgx-h100-10 has a GPU fallen off the bus (below its DGX H100 profile, a GPU not in NVML),
gpu-b02 is a Kubernetes node whose server runs no agent, dgx-a100-01 has a GPU with MIG
pending a reset, gpu-l40s-03 is drained for a fan replacement.

A week of GPU health (`DEMO_HEALTH_WEEK`, dated back from the load): GPU 5 of dgx-h100-10 fell
off the bus with an Xid 79 three hours ago; GPU 2 of dgx-h100-03 keeps page-faulting (Xid 31
on five days of the week, twice in the last day: a repeat offender); GPU 4 of dgx-h100-06 ran
out of spare rows (Xid 48, then Xid 64, and its remapping failure counter set); GPU 1 of
dgx-h100-08 had an NVLink error (Xid 74) last night, its NVLink CRC and replay counters up; GPU
6 of dgx-h100-02 had a double-bit ECC error four days ago, was reset and its row remapped
(Xid 63): the one episode resolved; and a training job on dgx-h100-01 hit an Xid 13. The
events are kernel-log lines, read by the agent's own parser into each report's `events`.

Its InfiniBand fabric (`demo_fabric`) is rail-optimised: a leaf per rail, two spines, every
DGX's NIC k on leaf k; dgx-a100-01's ConnectX-6 links run at HDR on the NDR fabric. The
L40S servers' RoCE NICs are on two Ethernet rail leaves, which their agents hear over LLDP
(`roce-leaf-r1`, `roce-leaf-r2`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agent.sources.kernel_log import KernelEvent, attach_events, parse_kernel_log

from .fabric import rail_fabric
from .fleet import SimulatedServer, fleet
from .schedulers import (
    DemoNode,
    Entry,
    Job,
    Pod,
    Snapshot,
    kubernetes_nodes,
    kubernetes_pods,
    pod_uid,
    slurm_jobs,
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


TRAIN = ("PyTorchJob", "llm-train")  # one workload of two 8-GPU pods: 2 nodes x 8 GPUs
TRAIN_AGO_S = 6 * 24 * 3600  # training for six days: the Xid 13 on dgx-h100-01 hit it


def _k8s(*pods: Pod) -> DemoNode:
    return DemoNode(K8S_CLUSTER, pods=pods)


def _slurm(state: str = "IDLE", *, reason: str = "", gpus_used: int = 0) -> DemoNode:
    return DemoNode(SLURM_CLUSTER, state=state, reason=reason, gpus_used=gpus_used)


DEMO_FLEET: tuple[DemoServer, ...] = (
    DemoServer(
        "dgx-h100-01",
        "h100",
        "rack-01",
        2,
        (_k8s(Pod("llm-train-worker-0", 8, TRAIN, started_ago_s=TRAIN_AGO_S)),),
    ),
    DemoServer(
        "dgx-h100-02",
        "h100",
        "rack-01",
        10,
        (_k8s(Pod("llm-train-worker-1", 8, TRAIN, started_ago_s=TRAIN_AGO_S)),),
    ),
    DemoServer("dgx-h100-03", "h100", "rack-01", 18, (_k8s(Pod("notebook-ana", 1)),)),
    DemoServer("dgx-h100-04", "h100", "rack-01", 26, (_k8s(),)),
    DemoServer("dgx-h100-05", "h100", "rack-02", 2, (_k8s(),)),
    DemoServer("dgx-h100-06", "h100", "rack-02", 10, (_k8s(),)),
    DemoServer("dgx-h100-07", "h100", "rack-02", 18, (_k8s(),)),
    DemoServer("dgx-h100-08", "h100", "rack-02", 26, (_k8s(),)),
    DemoServer("dgx-h100-09", "h100", "rack-03", 2, (_k8s(), _slurm("MIXED", gpus_used=6))),
    DemoServer("dgx-h100-10", "h100-lost", "rack-03", 10, (_slurm(),)),
    DemoServer("dgx-a100-01", "a100-mig", "rack-03", 18, (_slurm("MIXED", gpus_used=2),)),
    DemoServer("kvm-01", "kvm-host", "rack-03", 24),  # its GPUs are its VMs'
    DemoServer("gpu-l40s-01", "l40s", "rack-04", 10, (_slurm("ALLOCATED", gpus_used=4),)),
    DemoServer("gpu-l40s-02", "l40s", "rack-04", 14, (_slurm("ALLOCATED", gpus_used=4),)),
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


_MIN = 60
DEMO_JOBS: tuple[Job, ...] = (
    # a 4-GPU and a 2-GPU job sharing one 8-GPU server: still one node
    Job(
        5679,
        "llama-eval",
        "alice",
        "nlp",
        (("dgx-h100-09", (0, 1, 2, 3), "h100"),),
        "RUNNING",
        120 * _MIN,
    ),
    Job(
        5680,
        "vit-finetune",
        "bob",
        "vision",
        (("dgx-h100-09", (4, 5), "h100"),),
        "RUNNING",
        40 * _MIN,
    ),
    # running on the server whose GPU 5 fell off the bus three hours ago
    Job(
        5681,
        "moe-pretrain",
        "carol",
        "nlp",
        (("dgx-h100-10", (0, 1, 2, 3, 4, 5, 6), "h100"),),
        "RUNNING",
        300 * _MIN,
    ),
    # 2 nodes x 4 L40S over RoCE
    Job(
        5683,
        "cfd-ensemble",
        "dave",
        "hpc",
        (("gpu-l40s-01", (0, 1, 2, 3), "l40s"), ("gpu-l40s-02", (0, 1, 2, 3), "l40s")),
        "RUNNING",
        25 * _MIN,
    ),
    # an array's tasks on the A100's whole GPUs, and a job on one of its MIG devices
    *(
        Job(
            5690 + task,
            "protein-fold",
            "erin",
            "bio",
            (("dgx-a100-01", (3 + task,), "a100"),),
            "RUNNING",
            15 * _MIN,
            array=(5690, task),
        )
        for task in (1, 2)
    ),
    Job(
        5693,
        "notebook",
        "frank",
        "bio",
        (("dgx-a100-01", (0,), "a100_1g.10gb"),),
        "RUNNING",
        50 * _MIN,
    ),
    # waiting for four whole DGX nodes
    Job(5699, "llm-pretrain-70b", "alice", "nlp", state="PENDING", ask="gres/gpu:8"),
    # who used GPUs 6 and 7 of dgx-h100-09 before: ended an hour ago
    Job(
        5601,
        "sweep-lr",
        "bob",
        "vision",
        (("dgx-h100-09", (6, 7), "h100"),),
        "COMPLETED",
        200 * _MIN,
        ended_ago_s=60 * _MIN,
    ),
)
"""The Slurm cluster's jobs, as slurmrestd's `/jobs` answers (`simulator.schedulers.slurm_jobs`)."""


GIB = 2**30


@dataclass(frozen=True)
class DemoProcess:
    """A compute process NVML lists on one GPU, and whose it is by its cgroup: a Slurm job
    (`job`), a pod (`pod`: namespace/name), or nobody's (a stray left behind)."""

    hostname: str
    gpu: int
    pid: int
    name: str
    memory_gib: int
    job: str = ""
    pod: str = ""


def _ranks(hostname: str, gpus: range, pid: int, gib: int, **whose: str) -> list[DemoProcess]:
    return [DemoProcess(hostname, g, pid + g, "python3", gib, **whose) for g in gpus]


DEMO_PROCESSES: tuple[DemoProcess, ...] = (
    *_ranks("dgx-h100-09", range(4), 41000, 61, job="5679"),
    *_ranks("dgx-h100-09", range(4, 6), 42000, 30, job="5680"),
    # bob's job also runs on GPU 7, which Slurm never gave it: ConstrainDevices=no
    DemoProcess("dgx-h100-09", 7, 42007, "python3", 12, job="5680"),
    *_ranks("dgx-h100-10", range(7), 43000, 74, job="5681"),
    *_ranks("dgx-h100-01", range(8), 51000, 70, pod="ml/llm-train-worker-0"),
    *_ranks("dgx-h100-02", range(8), 52000, 70, pod="ml/llm-train-worker-1"),
    DemoProcess("dgx-h100-03", 0, 53000, "jupyter-kernel", 9, pod="ml/notebook-ana"),
    # 30 GiB held on a GPU no workload holds: the scheduler thinks it free
    DemoProcess("dgx-h100-04", 3, 7731, "python3", 30),
)
"""What the GPUs themselves say (NVML's compute processes and their cgroups)."""


def _container_id(pod: str) -> str:
    return hashlib.sha256(f"container/{pod}".encode()).hexdigest()


def demo_processes(report: dict[str, Any]) -> dict[str, Any]:
    """The report with each GPU's compute processes (`DEMO_PROCESSES`), as the agent sends
    them: every GPU of a server that runs the agent lists its processes, none or some."""
    hostname = report["host"]["hostname"]
    mine = [p for p in DEMO_PROCESSES if p.hostname == hostname]
    for gpu in report.get("gpus") or []:
        gpu["processes"] = [
            {
                "pid": p.pid,
                "name": p.name,
                "used_memory_bytes": p.memory_gib * GIB,
                "workload": (
                    {"scheduler": "slurm", "id": p.job, "step": "0"}
                    if p.job
                    else {
                        "scheduler": "kubernetes",
                        "pod_uid": pod_uid(*p.pod.split("/", 1)),
                        "container": _container_id(p.pod),
                    }
                    if p.pod
                    else None
                ),
            }
            for p in mine
            if p.gpu == gpu["index"]
        ]
    return report


def demo_pod_resources(report: dict[str, Any]) -> dict[str, Any]:
    """The report of a Kubernetes node's server with what the kubelet's pod-resources API
    says each pod's container holds: the GPUs its processes run on, by UUID."""
    hostname = report["host"]["hostname"]
    server = next((s for s in DEMO_FLEET if s.hostname == hostname), None)
    if server is None or not any(n.cluster == K8S_CLUSTER for n in server.nodes):
        return report
    uuids = {g["index"]: g["uuid"] for g in report.get("gpus") or []}
    pods: dict[str, set[int]] = {}
    for p in DEMO_PROCESSES:
        if p.hostname == hostname and p.pod:
            pods.setdefault(p.pod, set()).add(p.gpu)
    report["pod_resources"] = {
        "available": True,
        "error": None,
        "pods": [
            {
                "namespace": pod.split("/", 1)[0],
                "name": pod.split("/", 1)[1],
                "containers": [
                    {
                        "name": "main",
                        "devices": [
                            {"resource": "nvidia.com/gpu", "ids": [uuids[g] for g in sorted(gpus)]}
                        ],
                    }
                ],
            }
            for pod, gpus in sorted(pods.items())
        ],
    }
    return report


@dataclass(frozen=True)
class DemoEpisode:
    """Kernel-log lines of one health episode: `ago` before the load, on a GPU by its index
    (`gpu`; None for the GPU the server lost, found by its place on the PCI bus)."""

    hostname: str
    gpu: int | None
    ago: timedelta
    code: int
    text: str
    repeats: int = 1  # lines, a second apart


def _h(hours: float) -> timedelta:
    return timedelta(hours=hours)


DEMO_HEALTH_WEEK: tuple[DemoEpisode, ...] = (
    # the GPU that fell off the bus
    DemoEpisode("dgx-h100-10", None, _h(3), 79, "GPU has fallen off the bus."),
    # a repeat offender: the same GPU page-faulting on five days of the week
    *(
        DemoEpisode(
            "dgx-h100-03",
            2,
            _h(hours),
            31,
            "pid=48211, name=python3, channel 0x00000008, intr 00000000. MMU Fault: ENGINE "
            "GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_41e00000. Fault is of type "
            "FAULT_PDE ACCESS_TYPE_VIRT_READ",
            repeats,
        )
        for hours, repeats in ((146, 1), (98, 2), (50, 1), (9, 3), (2, 1))
    ),
    # a row-remap failure: a double-bit error, then no spare row left to remap it
    DemoEpisode(
        "dgx-h100-06",
        4,
        _h(51),
        48,
        "An uncorrectable double bit error (DBE) has "
        "been detected on GPU in the framebuffer at partition 6, subpartition 0.",
    ),
    DemoEpisode(
        "dgx-h100-06",
        4,
        _h(50.9),
        64,
        "pid='<unknown>', name=<unknown>, Row Remapper Error: failed to remap row (0x2, 0x1c40).",
    ),
    # an NVLink error last night
    DemoEpisode(
        "dgx-h100-08",
        1,
        _h(20),
        74,
        "pid='<unknown>', name=<unknown>, NVLink: "
        "fatal error detected on link 7(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
        3,
    ),
    # the episode resolved: a double-bit error, a reset, the row remapped
    DemoEpisode(
        "dgx-h100-02",
        6,
        _h(98.5),
        48,
        "An uncorrectable double bit error (DBE) "
        "has been detected on GPU in the framebuffer at partition 2, subpartition 1.",
    ),
    DemoEpisode(
        "dgx-h100-02",
        6,
        _h(97.5),
        63,
        "pid='<unknown>', name=<unknown>, Row "
        "Remapper: New row (0x1, 0x0b80) marked for remapping, reset gpu to activate.",
    ),
    # a training job's own bug: no action on the GPU
    DemoEpisode(
        "dgx-h100-01",
        0,
        _h(120),
        13,
        "pid=90122, name=python, Graphics SM Warp "
        "Exception on (GPC 2, TPC 1, SM 0): Out Of Range Address",
        4,
    ),
)

DEMO_RESOLVED_AT = _h(97)
"""When the one resolved episode's finding was judged (`ago`): raised then, resolved since."""


def demo_anchor(now: datetime) -> datetime:
    """The moment the week counts back from: `now` to the hour, so a demo run again within
    the hour sends the very same events (stored once), and a later run a later week."""
    return now.replace(minute=0, second=0, microsecond=0)


def _bus(report: dict[str, Any], gpu: int | None) -> str | None:
    """An index's PCI bus in the report, or the bus of the GPU on the PCI bus NVML misses."""
    if gpu is None:
        lost = [p for p in report.get("pci_gpus") or [] if p.get("in_nvml") is False]
        return lost[0]["pci_bus_id"] if lost else None
    return next((g["pci_bus_id"] for g in report["gpus"] if g["index"] == gpu), None)


def _kernel_bus(bus: str) -> str:
    """`00000000:9a:00.0` as the driver prints it in an Xid line: `0000:9a:00`."""
    domain, rest = bus.split(":", 1)
    return f"{domain[-4:]}:{rest.rsplit('.', 1)[0]}"


def demo_health_events(report: dict[str, Any], anchor: datetime) -> list[KernelEvent]:
    """The week's kernel-log events of one server's report, episode by episode (a log read per
    day: the agent's parser folds repeats within a read into one event)."""
    events: list[KernelEvent] = []
    for episode in DEMO_HEALTH_WEEK:
        if episode.hostname != report["host"]["hostname"]:
            continue
        bus = _bus(report, episode.gpu)
        if bus is None:
            continue
        start = anchor - episode.ago
        lines = [
            f"{(start + timedelta(seconds=k)).isoformat(timespec='microseconds')} NVRM: Xid "
            f"(PCI:{_kernel_bus(bus)}): {episode.code}, {episode.text}"
            for k in range(episode.repeats)
        ]
        found, _ = parse_kernel_log(lines, now=anchor)
        events.extend(found)
    return events


def _health_counters(server: DemoServer, machine: SimulatedServer) -> None:
    """The NVML counters the week left behind: a failed row remap, NVLink errors, a row
    remapped after a reset."""
    gpus = machine.machine.gpus
    if server.hostname == "dgx-h100-06":
        gpus[4].remapped_rows = (2, 9, False, True)
    elif server.hostname == "dgx-h100-08":
        gpus[1].nvlink_errors = (1842, 97, 3)
    elif server.hostname == "dgx-h100-02":
        gpus[6].remapped_rows = (0, 1, False, False)


def demo_report(machine: SimulatedServer, anchor: datetime) -> dict[str, Any]:
    """One demo server's report with the week's kernel-log events (`demo_anchor`)."""
    report = demo_pod_resources(demo_processes(machine.report()))
    events = demo_health_events(report, anchor)
    return attach_events(report, events) if events else report


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
    for server in DEMO_FLEET:
        _health_counters(server, built[server.hostname])
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
        Snapshot(SLURM_CLUSTER, slurm_jobs(DEMO_JOBS), "application/json"),
    ]


def demo_fabric(reports: dict[str, dict[str, Any]]) -> str:
    """The demo's InfiniBand fabric as `ibnetdiscover` prints it, from the servers' reports
    (by hostname) in declaration order, so every GUID and LID is the one its agent reports."""
    return rail_fabric(reports[server.hostname] for server in DEMO_FLEET)
