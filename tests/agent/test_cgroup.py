"""The workload of a GPU process from its /proc/PID/cgroup, on real path forms.

The forms are those Slurm's cgroup plugins and the kubelet's two cgroup drivers create, as
seen in public bug reports and docs (slurm cgroup_v2 docs, cgroup_exporter and runc issues).
"""

from __future__ import annotations

import pytest

from agent.cgroup import cgroup_paths, workload_from_cgroup

POD_UID = "a5c1f8d5-1919-434d-add7-4afaafdaef89"
SYSTEMD_UID = POD_UID.replace("-", "_")
CID = "5eed917563583925ffdbd40a64efb2aaffe58638e57add8becaf460fe74f5b1c"
HOST = "d6701ec289c56e4391acb11d07474b3139466857a305490575508a8b7a9fcf22"  # a Kind node's id


def slurm(job: str, step: str | None) -> dict[str, str | None]:
    return {"scheduler": "slurm", "id": job, "step": step}


def pod(container: str | None = CID, uid: str = POD_UID) -> dict[str, str | None]:
    return {"scheduler": "kubernetes", "pod_uid": uid, "container": container}


SLURM_V1 = """12:pids:/slurm/uid_1000/job_5679/step_0/task_0
11:devices:/slurm/uid_1000/job_5679/step_0/task_0
10:cpu,cpuacct:/system.slice/slurmd.service
9:memory:/slurm/uid_1000/job_5679/step_0/task_0
8:freezer:/slurm/uid_1000/job_5679/step_0
1:name=systemd:/system.slice/slurmd.service
0::/system.slice/slurmd.service
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (SLURM_V1, slurm("5679", "0")),
        ("4:memory:/slurm/uid_1000/job_5679/step_batch/task_0\n", slurm("5679", "batch")),
        ("4:memory:/slurm/uid_1000/job_5679/step_extern/task_0\n", slurm("5679", "extern")),
        ("7:freezer:/slurm/uid_0/job_12/step_interactive\n", slurm("12", "interactive")),
        ("7:devices:/slurm_gpu007/uid_1000/job_88/step_3/task_1\n", slurm("88", "3")),
        ("7:devices:/slurm/uid_1000/job_88\n", slurm("88", None)),
        ("0::/system.slice/slurmstepd.scope/job_5679/step_0/user/task_0\n", slurm("5679", "0")),
        (
            "0::/system.slice/slurmstepd.scope/job_5679/step_batch/user/task_0\n",
            slurm("5679", "batch"),
        ),
        ("0::/system.slice/slurmstepd.scope/job_5679/step_extern/slurm\n", slurm("5679", "extern")),
        ("0::/system.slice/slurmstepd.scope/job_41/step_2+1/user/task_0\n", slurm("41", "2+1")),
        ("0::/system.slice/cn1_slurmstepd.scope/job_7/step_0/user/task_0\n", slurm("7", "0")),
    ],
)
def test_slurm_jobs_under_both_cgroup_versions(text, expected):
    assert workload_from_cgroup(text) == expected


@pytest.mark.parametrize(
    "path",
    [
        # systemd driver, containerd; burstable, besteffort, guaranteed
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/cri-containerd-{CID}.scope",
        f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{SYSTEMD_UID}.slice/cri-containerd-{CID}.scope",
        f"/kubepods.slice/kubepods-pod{SYSTEMD_UID}.slice/cri-containerd-{CID}.scope",
        # systemd driver, Docker and CRI-O
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/docker-{CID}.scope",
        f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYSTEMD_UID}.slice/crio-{CID}.scope",
        # containerd's systemd cgroup names under cgroup v1
        f"/kubepods-besteffort-pod{SYSTEMD_UID}.slice:cri-containerd:{CID}",
        f"/system.slice/containerd.service/kubepods-besteffort-pod{SYSTEMD_UID}.slice:cri-containerd:{CID}",
        # cgroupfs driver
        f"/kubepods/burstable/pod{POD_UID}/{CID}",
        f"/kubepods/besteffort/pod{POD_UID}/{CID}",
        f"/kubepods/pod{POD_UID}/{CID}",
        f"/kubepods/burstable/pod{POD_UID}/crio-{CID}",
        # nested: a Kind node or Docker-in-Docker host
        f"/docker/{HOST}/kubepods/burstable/pod{POD_UID}/{CID}",
        f"/docker/{HOST}/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{SYSTEMD_UID}.slice/crio-{CID}.scope",
        f"/system.slice/docker-{HOST}.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{SYSTEMD_UID}.slice/cri-containerd-{CID}.scope",
    ],
)
def test_kubernetes_pods_under_both_kubelet_drivers(path):
    assert workload_from_cgroup(f"0::{path}\n") == pod()


def test_a_v1_file_names_the_pod_on_some_lines_only():
    text = (
        "12:rdma:/\n"
        "11:freezer:/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{SYSTEMD_UID}.slice/crio-{CID}.scope\n"
        "1:name=systemd:/system.slice/crio.service\n"
    )
    assert workload_from_cgroup(text) == pod()


def test_a_process_in_the_pods_own_cgroup_has_no_container():
    text = f"0::/kubepods.slice/kubepods-pod{SYSTEMD_UID}.slice\n"
    assert workload_from_cgroup(text) == pod(container=None)


def test_a_static_pods_hash_uid_is_kept():
    uid = "8daa50c3a64c9ff60bb9eab7b44b56fd"
    text = f"0::/kubepods/burstable/pod{uid}/{CID}\n"
    assert workload_from_cgroup(text) == pod(uid=uid)


def test_slurm_inside_a_pod_is_the_slurm_job():
    text = (
        "0::/kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{SYSTEMD_UID}.slice/system.slice/slurmstepd.scope/"
        "job_9/step_0/user/task_0\n"
    )
    assert workload_from_cgroup(text) == slurm("9", "0")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0::/\n",
        "0::/user.slice/user-1000.slice/session-3.scope\n",
        "0::/system.slice/docker-" + "d" * 64 + ".scope\n",
        "0::/system.slice/slurmd.service\n",
        "0::/kubepods.slice/kubepods-burstable.slice\n",
        # Slurm 26.05 keys v2 paths by SLUID without CgroupJobIdPaths=yes: no job id to give
        "0::/system.slice/slurmstepd.scope/s5K1KKYAYG5D00/step_0/user/task_0\n",
        "garbage without colons\n",
    ],
)
def test_no_workload_for_other_processes(text):
    assert workload_from_cgroup(text) is None


def test_paths_skip_malformed_lines():
    assert cgroup_paths("0::/a\nbad\n3:cpu:\n4:memory:/b\n") == ["/a", "/b"]
