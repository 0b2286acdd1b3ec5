"""The workloads findings: where what the GPUs say (their processes) disagrees with what the
schedulers say (their allocations), and workloads on GPUs or servers that need a person.

Pure: plain facts in (`WorkloadFacts`, gathered by `workloads.services.findings`), the
findings that should be open out (`FindingFact`); no queries, tested without a database.
One function per finding type, listed in `RULES`.

Subjects stay the same from pass to pass while the cause lasts: a process finding is about
a workload (or no workload) on one GPU, not about a pid (pids come and go within one job),
so a job that restarts its processes keeps its finding.

Each finding's `details` carry what a person needs (server, GPU index and UUID, pids, memory,
workload id and user), since the process rows are replaced by every report.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from findings.choices import FindingType, Severity
from findings.facts import FindingFact
from workloads.describe import workload_label

MIB = 2**20


@dataclass(frozen=True, slots=True)
class ProcessFact:
    """A compute process on a GPU (or MIG device) as its server's last report saw it.

    `device_uuid` is the MIG device's UUID for a process on a MIG device, else the GPU's.
    `owner_knowable` says the backend could have joined the process to a workload had one
    been running: true without a scheduler reference (a login shell's python), for a Slurm job
    on a server bound to a cluster whose jobs are listed, for a pod on a server bound to a
    cluster whose pods are listed and whose kubelet's pod-resources view answered. A process
    that is not knowable is never a stray.
    """

    server_id: int
    hostname: str
    gpu_id: int | None
    gpu_index: int | None
    gpu_uuid: str
    device_uuid: str
    mig_device_id: int | None
    pid: int
    name: str = ""
    used_memory_bytes: int | None = None
    scheduler: str = ""
    job_id: str = ""
    pod_uid: str = ""
    workload_id: int | None = None
    owner_knowable: bool = True


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """What a finding says about a workload."""

    id: int
    cluster_id: int
    scheduler_id: str
    user: str = ""
    account: str = ""
    state: str = "running"
    kind: str = "slurm_job"

    @property
    def running(self) -> bool:
        return self.state == "running"

    def words(self) -> str:
        return workload_label(self.kind, self.scheduler_id, self.user)

    def details(self) -> dict[str, Any]:
        return {
            "workload": self.id,
            "scheduler_id": self.scheduler_id,
            "user": self.user,
            "account": self.account,
            "state": self.state,
        }


@dataclass(frozen=True, slots=True)
class HeldDevice:
    """One open allocation of a workload: a GPU (whole: `mig_device_id` None) or MIG device.

    `server_id` is the allocation's server, else its node's bound server; `uuid` the device
    id the kubelet named (a time-sliced replica's `::N` suffix removed), possibly empty.
    """

    workload_id: int
    server_id: int | None
    node_id: int | None
    gpu_id: int | None
    mig_device_id: int | None = None
    uuid: str = ""
    hostname: str = ""
    gpu_index: int | None = None

    @property
    def known(self) -> bool:
        """Whether the scheduler said which device (not just how many)."""
        return bool(self.gpu_id or self.mig_device_id or self.uuid)


@dataclass(frozen=True, slots=True)
class GpuNeed:
    """A GPU that needs action (`health.action`, the one rule), in words."""

    gpu_id: int
    server_id: int
    hostname: str
    index: int
    uuid: str
    reason: str
    words: str


@dataclass(frozen=True, slots=True)
class WrongPlace:
    """A server or node that reconciliation marks wrong: its open critical findings."""

    server_id: int | None
    hostname: str
    finding_ids: tuple[int, ...]
    words: tuple[str, ...]


@dataclass(frozen=True)
class WorkloadFacts:
    """Everything the rules read, gathered at the edge."""

    processes: tuple[ProcessFact, ...] = ()
    workloads: Mapping[int, WorkloadRef] = field(default_factory=dict)
    held: tuple[HeldDevice, ...] = ()
    needing_action: Mapping[int, GpuNeed] = field(default_factory=dict)
    wrong_servers: Mapping[int, WrongPlace] = field(default_factory=dict)
    wrong_nodes: Mapping[int, WrongPlace] = field(default_factory=dict)


def strip_replica(device_id: str) -> str:
    """A time-slicing replica's id (`GPU-<uuid>::3`) names its GPU (`GPU-<uuid>`)."""
    return device_id.split("::", 1)[0]


def _memory_words(total: int | None) -> str:
    return "memory unknown" if total is None else f"{total // MIB} MiB"


def _memory(processes: Iterable[ProcessFact]) -> int | None:
    known = [p.used_memory_bytes for p in processes if p.used_memory_bytes is not None]
    return sum(known) if known else None


def _where(p: ProcessFact) -> str:
    gpu = f"GPU {p.gpu_index}" if p.gpu_index is not None else p.gpu_uuid
    mig = " (MIG device)" if p.mig_device_id or p.device_uuid != p.gpu_uuid else ""
    return f"{p.hostname} {gpu}{mig}"


def _process_details(group: list[ProcessFact]) -> dict[str, Any]:
    first = group[0]
    return {
        "server": first.server_id,
        "hostname": first.hostname,
        "gpu": first.gpu_id,
        "gpu_index": first.gpu_index,
        "gpu_uuid": first.gpu_uuid,
        "device_uuid": first.device_uuid,
        "mig_device": first.mig_device_id,
        "pids": sorted(p.pid for p in group),
        "processes": [
            {"pid": p.pid, "name": p.name, "used_memory_bytes": p.used_memory_bytes}
            for p in sorted(group, key=lambda p: p.pid)
        ],
        "used_memory_bytes": _memory(group),
    }


def _on_device(held: HeldDevice, p: ProcessFact) -> bool:
    """Whether an allocation covers the device the process runs on: that MIG device, the
    whole GPU, or the device id the kubelet named."""
    if held.mig_device_id is not None and held.mig_device_id == p.mig_device_id:
        return True
    if held.mig_device_id is None and held.gpu_id is not None and held.gpu_id == p.gpu_id:
        return True
    return bool(held.uuid) and held.uuid in (p.device_uuid, p.gpu_uuid)


def _by_device(processes: Iterable[ProcessFact]) -> dict[tuple[int, str], list[ProcessFact]]:
    groups: dict[tuple[int, str], list[ProcessFact]] = defaultdict(list)
    for p in processes:
        groups[(p.server_id, p.device_uuid)].append(p)
    return groups


# -- the rules ---------------------------------------------------------------------------


def process_outside_allocation(facts: WorkloadFacts) -> list[FindingFact]:
    """A running workload's process on a GPU its allocations on that server do not include:
    the allocation is not enforced (Slurm's `ConstrainDevices=no`, a container given every
    GPU, a job's process on a server it was not given). Judged only where the scheduler named
    the workload's devices: an allocation known by count alone says nothing about which GPU
    is right."""
    held: dict[tuple[int, int | None], list[HeldDevice]] = defaultdict(list)
    named: set[int] = set()  # workloads whose devices the scheduler named somewhere
    for h in facts.held:
        held[(h.workload_id, h.server_id)].append(h)
        if h.known:
            named.add(h.workload_id)
    groups: dict[tuple[int, int, str], list[ProcessFact]] = defaultdict(list)
    for p in facts.processes:
        w = facts.workloads.get(p.workload_id) if p.workload_id is not None else None
        if w is None or not w.running:
            continue
        rows = held.get((w.id, p.server_id), [])
        # Judged where its devices here are named, or where it holds nothing here at all
        # while its devices elsewhere are: a process on a server the job was not given.
        judged = any(h.known for h in rows) if rows else w.id in named
        if not judged or any(_on_device(h, p) for h in rows):
            continue
        groups[(w.id, p.server_id, p.device_uuid)].append(p)
    out = []
    for (wid, server_id, device), group in sorted(groups.items()):
        w = facts.workloads[wid]
        given = sorted(
            h.gpu_index for h in held[(wid, server_id)] if h.gpu_index is not None and h.known
        )
        if not held[(wid, server_id)]:
            given_words = "no GPU of this server"
        elif given:
            given_words = f"GPUs {', '.join(map(str, given))} here"
        else:
            given_words = "other devices here"
        out.append(
            FindingFact(
                type=FindingType.PROCESS_OUTSIDE_ALLOCATION,
                severity=Severity.WARNING,
                subject=f"workload:{wid}:server:{server_id}:device:{device}",
                message=(
                    f"{_where(group[0])}: {len(group)} process(es) of {w.words()} "
                    f"({_memory_words(_memory(group))}), which was given {given_words}"
                ),
                server_id=server_id,
                cluster_id=w.cluster_id,
                gpu_id=group[0].gpu_id,
                action=(
                    "The allocation is not enforced: constrain devices (Slurm "
                    "ConstrainDevices=yes in cgroup.conf; no NVIDIA_VISIBLE_DEVICES=all "
                    "in the container) and ask the job's owner to use only its GPUs."
                ),
                details={
                    **_process_details(group),
                    **w.details(),
                    "allocated_gpu_indexes": given,
                },
            )
        )
    return out


def stray_gpu_process(facts: WorkloadFacts) -> list[FindingFact]:
    """GPU memory held by processes of no running workload: the scheduler thinks the GPU is
    free (or another job's) and the next job there fails for memory. Critical when another
    running workload holds the GPU now."""
    strays = []
    for p in facts.processes:
        w = facts.workloads.get(p.workload_id) if p.workload_id is not None else None
        if w is not None and w.running:
            continue
        if w is None and not p.owner_knowable:
            continue  # a pod or job the backend cannot see: unknown, not stray
        strays.append(p)
    out = []
    for (server_id, device), group in sorted(_by_device(strays).items()):
        first = group[0]
        holders = sorted(
            {
                h.workload_id
                for h in facts.held
                if h.server_id == server_id
                and _on_device(h, first)
                and (w := facts.workloads.get(h.workload_id)) is not None
                and w.running
            }
        )
        ended = sorted(
            {p.workload_id for p in group if p.workload_id is not None},
        )
        ended_words = [facts.workloads[i].words() for i in ended if i in facts.workloads]
        whose = f" of ended {', '.join(ended_words)}" if ended_words else " of no workload"
        held_words = (
            f"; the GPU is allocated to {', '.join(facts.workloads[i].words() for i in holders)}"
            if holders
            else "; the scheduler thinks it is free"
        )
        out.append(
            FindingFact(
                type=FindingType.STRAY_GPU_PROCESS,
                # Critical only about a known GPU: a critical finding about the server
                # itself would make every GPU of it need action (health.action).
                severity=Severity.CRITICAL
                if holders and first.gpu_id is not None
                else Severity.WARNING,
                subject=f"server:{server_id}:device:{device}",
                message=(
                    f"{_where(first)}: {len(group)} process(es){whose} hold "
                    f"{_memory_words(_memory(group))}{held_words}"
                ),
                server_id=server_id,
                gpu_id=first.gpu_id,
                action=(
                    "Find the processes (nvidia-smi; pids in the details) and end them, or "
                    "drain the GPU until they are gone: the next job there may fail."
                ),
                details={
                    **_process_details(group),
                    "ended_workloads": [
                        facts.workloads[i].details() for i in ended if i in facts.workloads
                    ],
                    "allocated_to": [facts.workloads[i].details() for i in holders],
                    "jobs": sorted({p.job_id for p in group if p.job_id}),
                    "pod_uids": sorted({p.pod_uid for p in group if p.pod_uid}),
                },
            )
        )
    return out


def _running_on_gpus(facts: WorkloadFacts) -> dict[tuple[int, int], HeldDevice | ProcessFact]:
    """(workload, GPU id) for every GPU a running workload holds (allocation) or runs on
    (its processes)."""
    on: dict[tuple[int, int], HeldDevice | ProcessFact] = {}
    for h in facts.held:
        w = facts.workloads.get(h.workload_id)
        if w is not None and w.running and h.gpu_id is not None:
            on.setdefault((w.id, h.gpu_id), h)
    for p in facts.processes:
        w = facts.workloads.get(p.workload_id) if p.workload_id is not None else None
        if w is not None and w.running and p.gpu_id is not None:
            on.setdefault((w.id, p.gpu_id), p)
    return on


def workload_on_gpu_needing_action(facts: WorkloadFacts) -> list[FindingFact]:
    """A running workload on a GPU that needs action (drain, reset, RMA): the job is at risk,
    and the GPU cannot be fixed until it ends or moves. One finding per workload, server and
    reason: a reason that holds for the whole server (its critical finding) is one finding
    naming the GPUs, not one per GPU."""
    groups: dict[tuple[int, int, str], list[GpuNeed]] = defaultdict(list)
    for (wid, gpu_id), _seen in sorted(_running_on_gpus(facts).items()):
        need = facts.needing_action.get(gpu_id)
        if need is not None:
            groups[(wid, need.server_id, need.words)].append(need)
    out = []
    for (wid, server_id, words), needs in sorted(groups.items()):
        w = facts.workloads[wid]
        first = needs[0]
        one = len(needs) == 1
        gpus = f"GPU {first.index}" if one else "GPUs " + ", ".join(str(n.index) for n in needs)
        out.append(
            FindingFact(
                type=FindingType.WORKLOAD_ON_GPU_NEEDING_ACTION,
                severity=Severity.WARNING,
                subject=(
                    f"workload:{wid}:gpu:{first.gpu_id}"
                    if one
                    else f"workload:{wid}:server:{server_id}:{first.reason}"
                ),
                message=f"{w.words()} runs on {first.hostname} {gpus}: {words}",
                server_id=server_id,
                cluster_id=w.cluster_id,
                gpu_id=first.gpu_id if one else None,
                action=(
                    "Tell the workload's owner; let it end or requeue it elsewhere, then act "
                    "on the GPU."
                ),
                details={
                    **w.details(),
                    "server": server_id,
                    "hostname": first.hostname,
                    "gpu": first.gpu_id if one else None,
                    "gpus": [n.gpu_id for n in needs],
                    "gpu_index": first.index if one else None,
                    "gpu_indexes": [n.index for n in needs],
                    "gpu_uuid": first.uuid if one else None,
                    "reason": first.reason,
                    "reason_words": words,
                },
            )
        )
    return out


def workload_on_misreconciled_server(facts: WorkloadFacts) -> list[FindingFact]:
    """A running workload holding GPUs on a server (or node) that reconciliation marks wrong
    (an open critical finding): what the scheduler believes of that machine is not so."""
    gpus: dict[tuple[int, int], set[int | None]] = defaultdict(set)
    places: dict[tuple[int, int], WrongPlace] = {}
    for h in facts.held:
        w = facts.workloads.get(h.workload_id)
        if w is None or not w.running:
            continue
        wrong = (facts.wrong_servers.get(h.server_id) if h.server_id is not None else None) or (
            facts.wrong_nodes.get(h.node_id) if h.node_id is not None else None
        )
        if wrong is None:
            continue
        place = wrong.server_id if wrong.server_id is not None else -(h.node_id or 0)
        key = (w.id, place)
        places[key] = wrong
        gpus[key].add(h.gpu_index)
    out = []
    for (wid, place), wrong in sorted(places.items(), key=lambda kv: kv[0]):
        w = facts.workloads[wid]
        indexes = sorted(i for i in gpus[(wid, place)] if i is not None)
        held = len(gpus[(wid, place)])
        out.append(
            FindingFact(
                type=FindingType.WORKLOAD_ON_MISRECONCILED_SERVER,
                severity=Severity.WARNING,
                subject=f"workload:{wid}:place:{place}",
                message=(
                    f"{w.words()} holds GPUs on {wrong.hostname}, which reconciliation marks "
                    f"wrong: {'; '.join(wrong.words)}"
                ),
                server_id=wrong.server_id,
                cluster_id=w.cluster_id,
                action=(
                    "Fix what the server's findings name; until then the scheduler's view "
                    "of this machine (its GPUs, its health) may be wrong for this job."
                ),
                details={
                    **w.details(),
                    "server": wrong.server_id,
                    "hostname": wrong.hostname,
                    "gpu_indexes": indexes,
                    "gpus_held": held,
                    "findings": list(wrong.finding_ids),
                },
            )
        )
    return out


RULES: tuple[Callable[[WorkloadFacts], list[FindingFact]], ...] = (
    process_outside_allocation,
    stray_gpu_process,
    workload_on_gpu_needing_action,
    workload_on_misreconciled_server,
)


def evaluate(facts: WorkloadFacts) -> dict[tuple[str, str], FindingFact]:
    """Every rule over the facts: the findings that should be open, by (type, subject)."""
    return {fact.key: fact for rule in RULES for fact in rule(facts)}
