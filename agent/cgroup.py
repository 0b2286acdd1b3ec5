"""Whose a process is, from the text of its `/proc/PID/cgroup` (pure: text in, dict out).

A GPU process is only a pid to NVML; its cgroup names the scheduler's unit that started it,
which is what lets the backend tell a job's own process from a stray one on a GPU the job
was not given. Forms read (the controller-relative path of any line; cgroup v1 files have a
line per hierarchy and only some name the job):

- Slurm, cgroup v1: `/slurm/uid_1000/job_5679/step_0/task_0` (`/slurm_<node>/` with
  multiple slurmd), steps `batch`, `extern`, `interactive`, numbered, and `0+1` (a
  heterogeneous step).
- Slurm, cgroup v2: `/system.slice/slurmstepd.scope/job_5679/step_0/user/task_0`
  (`<node>_slurmstepd.scope` with multiple slurmd; the stepd itself sits in `.../slurm`).
- Kubernetes, systemd driver: `/kubepods.slice/kubepods-burstable.slice/
  kubepods-burstable-pod<uid, _ for ->.slice/cri-containerd-<id>.scope` (also
  `kubepods-besteffort-...`, guaranteed pods as `kubepods-pod<uid>.slice` directly under
  `kubepods.slice`, `docker-<id>.scope`, `crio-<id>.scope`, and containerd's v1
  `...pod<uid>.slice:cri-containerd:<id>`); Kind's `kubelet-kubepods-...` slices.
- Kubernetes, cgroupfs driver: `/kubepods/burstable/pod<uid>/<id>`, `/kubepods/pod<uid>/<id>`.
- Either, nested in a container host (Kind, Docker-in-Docker): `/docker/<id>/kubepods/...`.

A Slurm job id is a string (`"5679"`): an array task's cgroup carries its own job id. Slurm
26.05 keys cgroup v2 paths by SLUID unless `CgroupJobIdPaths=yes`: such a path names no job
id, and the process is reported with no workload rather than a wrong one.
"""

from __future__ import annotations

import re
from typing import Any

Workload = dict[str, Any]

_SLURM_V1 = re.compile(r"/slurm(?:_[^/]+)?/uid_\d+/job_(?P<job>\d+)(?:/step_(?P<step>[^/]+))?")
_SLURM_V2 = re.compile(r"/(?:[^/]+_)?slurmstepd\.scope/job_(?P<job>\d+)(?:/step_(?P<step>[^/]+))?")
_STEP = re.compile(r"^(?:\d+(?:\+\d+)?|batch|extern|interactive)$")

_UID = r"[0-9a-fA-F][0-9a-fA-F_-]{7,63}"
# systemd driver: `kubepods-[qos-]pod<uid>.slice` (Kind prefixes `kubelet-`)
_K8S_SYSTEMD_POD = re.compile(
    rf"(?:^|/)(?:[a-z0-9]+-)*kubepods-(?:burstable-|besteffort-)?pod(?P<uid>{_UID})\.slice"
    r"(?::[a-z-]+:(?P<v1id>[0-9a-f]{12,64}))?(?P<rest>/.*)?$"
)
# cgroupfs driver: `/kubepods[/qos]/pod<uid>[/<container id>]`
_K8S_CGROUPFS_POD = re.compile(
    rf"/kubepods(?:/burstable|/besteffort)?/pod(?P<uid>{_UID})(?P<rest>/.*)?$"
)
_SCOPE_CONTAINER = re.compile(
    r"^/(?:cri-containerd|docker|crio|containerd)-(?P<id>[0-9a-f]{12,64})"
)
_PLAIN_CONTAINER = re.compile(r"^/(?P<id>[0-9a-f]{12,64})(?:/|$)")


def cgroup_paths(text: str) -> list[str]:
    """The paths of a `/proc/PID/cgroup` file, in its order (`ID:controllers:path` lines)."""
    paths: list[str] = []
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) == 3 and parts[2]:
            paths.append(parts[2])
    return paths


def slurm_workload(path: str) -> Workload | None:
    """The Slurm job and step a cgroup path names, or None."""
    match = _SLURM_V1.search(path) or _SLURM_V2.search(path)
    if match is None:
        return None
    step = match["step"]
    return {
        "scheduler": "slurm",
        "id": match["job"],
        "step": step if step and _STEP.match(step) else None,
    }


def kubernetes_workload(path: str) -> Workload | None:
    """The pod UID and container id a cgroup path names, or None."""
    match = _K8S_SYSTEMD_POD.search(path)
    if match is not None:
        uid = match["uid"].replace("_", "-")
        container = match["v1id"] or _container_id(match["rest"], scoped=True)
    else:
        match = _K8S_CGROUPFS_POD.search(path)
        if match is None:
            return None
        uid = match["uid"]
        container = _container_id(match["rest"], scoped=False)
    return {"scheduler": "kubernetes", "pod_uid": uid.lower(), "container": container}


def _container_id(rest: str | None, *, scoped: bool) -> str | None:
    """The runtime's container id below a pod's cgroup (`cri-containerd-<id>.scope`, or a
    bare id under cgroupfs); None for a process in the pod's own cgroup."""
    if not rest:
        return None
    match = (_SCOPE_CONTAINER if scoped else _PLAIN_CONTAINER).match(rest)
    if match is None and not scoped:
        match = _SCOPE_CONTAINER.match(rest)  # cgroupfs pods with a runtime's scope names
    return match["id"] if match else None


def workload_from_cgroup(text: str) -> Workload | None:
    """The workload a process belongs to, from its `/proc/PID/cgroup` text; None when no line
    names a Slurm job or a Kubernetes pod (a login shell, a system service, a bare container).

    A Slurm job wins over a pod: slurmd run inside a pod (Slurm on Kubernetes) puts the job's
    cgroup below the pod's, and the job is the workload that holds the GPU.
    """
    paths = cgroup_paths(text)
    for path in paths:
        found = slurm_workload(path)
        if found is not None:
            return found
    for path in paths:
        found = kubernetes_workload(path)
        if found is not None:
            return found
    return None
