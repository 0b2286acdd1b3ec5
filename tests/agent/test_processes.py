"""What runs on each GPU: the collector on fake NVML processes and a fake /proc tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.collector import collect
from agent.host import SysHost
from agent.nvml import ComputeProcess
from agent.processes import MAX_PROCESSES, process_entry
from agent.schema import report_digest
from simulator.fake_nvml import FakeNvmlBackend, fake_runner, materialize
from simulator.profiles import build

POD_UID = "0125ec2f-b64a-4868-8f5b-94b56cbab864"
CID = "ee4b20e90ac7f42a10bd004d05646b13d8ab5e2c5e7cbc01abf8006bac016459"
SLURM_V2 = "0::/system.slice/slurmstepd.scope/job_5679/step_0/user/task_0\n"
K8S = (
    "0::/kubepods.slice/kubepods-besteffort.slice/"
    f"kubepods-besteffort-pod{POD_UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope\n"
)


def write_process(proc: Path, pid: int, comm: str, cgroup: str) -> None:
    folder = proc / str(pid)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "comm").write_text(comm + "\n")
    (folder / "cgroup").write_text(cgroup)


def run(machine, root: Path, backend=None):
    materialize(machine, root)
    return collect(backend or FakeNvmlBackend(machine), SysHost(root, run=fake_runner(machine)))


def test_each_gpus_processes_carry_name_memory_and_workload(fake_root, validate):
    machine = build("h100")
    machine.gpus[0].processes = [
        ComputeProcess(5001, 40 << 30),
        ComputeProcess(4001, None),  # NVML_VALUE_NOT_AVAILABLE
    ]
    machine.gpus[1].processes = [ComputeProcess(6001, 1 << 20), ComputeProcess(6002, 2 << 20)]
    machine.processes = {  # the fake machine's /proc, as materialize writes it
        5001: ("python", SLURM_V2),
        4001: ("torchrun", K8S),
        6001: ("sshd-session", "0::/user.slice/user-1000.slice\n"),
    }
    # pid 6002 has gone since NVML listed it: no /proc entry
    report = run(machine, fake_root / "root")
    validate(report)
    first, second = report["gpus"][0]["processes"], report["gpus"][1]["processes"]
    assert first == [
        {
            "pid": 4001,
            "name": "torchrun",
            "used_memory_bytes": None,
            "workload": {"scheduler": "kubernetes", "pod_uid": POD_UID, "container": CID},
        },
        {
            "pid": 5001,
            "name": "python",
            "used_memory_bytes": 40 << 30,
            "workload": {"scheduler": "slurm", "id": "5679", "step": "0"},
        },
    ]
    assert second == [
        {"pid": 6001, "name": "sshd-session", "used_memory_bytes": 1 << 20, "workload": None},
        {"pid": 6002, "name": None, "used_memory_bytes": 2 << 20, "workload": None},
    ]
    assert report["gpus"][2]["processes"] == []  # an idle GPU: known to run nothing


def test_mig_devices_carry_their_own_processes(fake_root, validate):
    machine = build("a100-mig")
    gpu = next(g for g in machine.gpus if g.mig_devices)
    first_mig, *_ = gpu.mig_devices
    gpu.mig_processes = {first_mig.uuid: [ComputeProcess(7001, 5 << 30)]}
    root = fake_root / "root"
    write_process(root / "proc", 7001, "python3", SLURM_V2.replace("step_0", "step_batch"))
    report = run(machine, root)
    validate(report)
    entry = next(g for g in report["gpus"] if g["uuid"] == gpu.uuid)
    assert entry["processes"] == []
    by_uuid = {d["uuid"]: d["processes"] for d in entry["mig_devices"]}
    assert by_uuid.pop(first_mig.uuid) == [
        {
            "pid": 7001,
            "name": "python3",
            "used_memory_bytes": 5 << 30,
            "workload": {"scheduler": "slurm", "id": "5679", "step": "batch"},
        }
    ]
    assert all(found == [] for found in by_uuid.values())


@pytest.mark.parametrize("reason", ["Not Supported", "Insufficient Permissions", "Unknown Error"])
def test_nvml_refusing_the_process_list_is_a_warning_not_a_failed_report(
    fake_root, validate, reason
):
    machine = build("a100-mig")
    for gpu in machine.gpus:
        gpu.processes_error = reason
    report = run(machine, fake_root / "root")
    validate(report)
    assert report["nvml_error"] is None
    for gpu in report["gpus"]:
        assert gpu["status"] == "ok" and gpu["processes"] is None
        assert all(d["processes"] is None for d in gpu.get("mig_devices", []))
    warnings = [w for w in report["warnings"] if "compute processes unreadable" in w]
    assert len(warnings) == len(report["gpus"]) and warnings[0].endswith(reason)


def test_a_lost_gpu_has_no_process_list_and_no_second_warning(fake_root, validate):
    report = run(build("h100-gpu-error"), fake_root / "root")
    validate(report)
    assert report["gpus"][3]["status"] == "error" and report["gpus"][3]["processes"] is None
    assert not any("compute processes" in w for w in report["warnings"])


def test_a_changed_process_set_changes_the_digest(fake_root):
    """Processes are facts, not volatile readings: a new one is a full report, not a
    heartbeat, so the backend learns of a stray process at once."""
    machine = build("l40s")
    root = fake_root / "root"
    materialize(machine, root)
    host = SysHost(root, run=fake_runner(machine))
    backend = FakeNvmlBackend(machine)
    idle = report_digest(collect(backend, host, collected_at="2026-01-01T00:00:00Z"))
    again = report_digest(collect(backend, host, collected_at="2026-01-01T00:01:00Z"))
    machine.gpus[0].processes = [ComputeProcess(9001, 1 << 30)]
    busy = report_digest(collect(backend, host, collected_at="2026-01-01T00:02:00Z"))
    assert idle == again and busy != idle


def test_an_unreadable_proc_entry_is_unknown_not_an_error(tmp_path):
    folder = tmp_path / "proc" / "42"
    folder.mkdir(parents=True)
    (folder / "comm").write_text("secret\n")
    (folder / "cgroup").write_text(SLURM_V2)
    os.chmod(folder / "cgroup", 0)
    os.chmod(folder / "comm", 0)
    try:
        entry = process_entry(42, 1, tmp_path / "proc")
    finally:
        os.chmod(folder / "cgroup", 0o644)
        os.chmod(folder / "comm", 0o644)
    if os.geteuid() == 0:  # root reads through the mode bits
        assert entry["workload"] == {"scheduler": "slurm", "id": "5679", "step": "0"}
    else:
        assert entry == {"pid": 42, "name": None, "used_memory_bytes": 1, "workload": None}


def test_a_busy_gpu_is_cut_at_the_schemas_bound(fake_root, validate):
    machine = build("l40s")
    machine.gpus[0].processes = [ComputeProcess(pid, 1) for pid in range(1, MAX_PROCESSES + 50)]
    report = run(machine, fake_root / "root")
    validate(report)
    assert len(report["gpus"][0]["processes"]) == MAX_PROCESSES
