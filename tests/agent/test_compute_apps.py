"""Saved `nvidia-smi --query-compute-apps` output: the real sample to the byte, the header
variants, and `collect --compute-apps` end to end."""

from __future__ import annotations

import json

import pytest

from agent.sources.compute_apps import ComputeApp, attach_compute_apps, parse_compute_apps
from agent.sources.smi_types import SmiParseError

from .test_transport import agent

SAMPLE = "nvsmi-query-compute-apps-rtx4080s-na-serial-utku.csv"
MIB = 1024 * 1024
GPU = "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a"  # the A100 of the MIG sample


def test_the_real_sample_exactly(sample_bytes):
    apps = parse_compute_apps(sample_bytes(SAMPLE))
    # the capture masked the UUID to zeros: no UUID, the bus id names the GPU
    assert apps.rows == [
        ComputeApp(2165, None, "0000:01:00.0", "/usr/bin/kwin_wayland", 25 * MIB),
        ComputeApp(5022, None, "0000:01:00.0", "ffmpeg", 503 * MIB),
        ComputeApp(5021, None, "0000:01:00.0", "ffmpeg", 360 * MIB),
    ]
    assert apps.warnings == []


def test_the_sample_attaches_by_bus_id_to_a_gpu_with_a_synthetic_uuid(sample_bytes, tmp_path):
    report = {
        "gpus": [{"index": 0, "uuid": "GPU-synthetic", "pci_bus_id": "0000:01:00.0"}],
        "warnings": [],
    }
    attach_compute_apps(report, parse_compute_apps(sample_bytes(SAMPLE)), proc_root=tmp_path)
    assert [
        (p["pid"], p["name"], p["used_memory_bytes"]) for p in report["gpus"][0]["processes"]
    ] == [
        (2165, "/usr/bin/kwin_wayland", 25 * MIB),
        (5021, "ffmpeg", 360 * MIB),
        (5022, "ffmpeg", 503 * MIB),
    ]
    assert report["warnings"] == []


NOHEADER_COLUMNS = ["pid", "gpu_uuid", "used_memory", "process_name"]


@pytest.mark.parametrize(
    ("text", "columns"),
    [
        # the documented query, with header and units
        (
            f"gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n{GPU}, 4242, python, 1024 MiB\n",
            None,
        ),
        # nounits: the unit only in the header
        (f"gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n{GPU}, 4242, python, 1024\n", None),
        # another order chosen by the person, with names as the query spells them
        (f"pid, used_memory [MiB], gpu_uuid, name\n4242, 1024 MiB, {GPU}, python\n", None),
        # noheader: the documented order, or the columns named
        (f"{GPU}, 4242, python, 1024 MiB\n", None),
        (f"4242, {GPU}, 1024, python\n", NOHEADER_COLUMNS),
    ],
    ids=["header", "nounits", "reordered", "noheader", "noheader-columns"],
)
def test_header_variants_give_one_row(text, columns):
    apps = parse_compute_apps(text, columns=columns)
    assert apps.rows == [ComputeApp(4242, GPU, None, "python", 1024 * MIB)]


def test_na_values_and_names_with_commas():
    text = (
        "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
        f"{GPU}, 7, [N/A], [N/A]\n"
        f"{GPU}, 8, python -c import a, b, 12 MiB\n"
    )
    assert parse_compute_apps(text).rows == [
        ComputeApp(7, GPU, None, None, None),
        ComputeApp(8, GPU, None, "python -c import a, b", 12 * MIB),
    ]


def test_nothing_running_is_an_empty_file_or_a_header_alone():
    assert parse_compute_apps("").rows == []
    assert parse_compute_apps("gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n").rows == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("index, name\n0, NVIDIA H100\n", "no pid column"),
        ("pid, process_name\n1, x\n", "no gpu_uuid or gpu_bus_id"),
        ("1, 2, 3\n", "no header and 3 columns"),
        (f"gpu_uuid, pid\n{GPU}\n", "line 2: 1 values for 2 columns"),
    ],
)
def test_files_that_are_not_compute_apps_are_refused(text, message):
    with pytest.raises(SmiParseError, match=message):
        parse_compute_apps(text)


def test_collect_with_compute_apps_prints_processes(samples, tmp_path, validate):
    """`collect --nvidia-smi-xml ... --compute-apps ...`: processes on the GPU and on a MIG
    device, named from the file, each pid's workload from --proc-root."""
    xml = samples / "nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml"
    first = json.loads(agent("collect", "--nvidia-smi-xml", str(xml), "--hostname", "a100").stdout)
    mig_uuid = first["gpus"][0]["mig_devices"][0]["uuid"]
    apps = tmp_path / "apps.csv"
    apps.write_text(
        "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
        f"{GPU}, 4242, python, 1024 MiB\n"
        f"{mig_uuid}, 4343, torchrun, 2048 MiB\n"
        "GPU-99999999-9999-9999-9999-999999999999, 5, other, 1 MiB\n"
    )
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text(
        "0::/system.slice/slurmstepd.scope/job_5679/step_0/user/task_0\n"
    )
    done = agent(
        "collect",
        "--nvidia-smi-xml",
        str(xml),
        "--hostname",
        "a100",
        "--compute-apps",
        str(apps),
        "--proc-root",
        str(proc),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    validate(report)
    gpu = report["gpus"][0]
    assert gpu["processes"] == [
        {
            "pid": 4242,
            "name": "python",
            "used_memory_bytes": 1024 * MIB,
            "workload": {"scheduler": "slurm", "id": "5679", "step": "0"},
        }
    ]
    mig = gpu["mig_devices"][0]
    assert mig["processes"] == [
        {"pid": 4343, "name": "torchrun", "used_memory_bytes": 2048 * MIB, "workload": None}
    ]
    assert all(d["processes"] == [] for d in gpu["mig_devices"][1:])
    assert any("pid 5 ran on a GPU the report does not have" in w for w in report["warnings"])
    assert "pod_resources" not in report  # not asked, and no kubelet socket here


def test_collect_refuses_a_bad_compute_apps_file(samples, tmp_path):
    apps = tmp_path / "apps.csv"
    apps.write_text("index, name\n0, x\n")
    xml = samples / "nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml"
    done = agent("collect", "--nvidia-smi-xml", str(xml), "--compute-apps", str(apps))
    assert done.returncode == 2
    assert "no pid column" in done.stderr and done.stderr.count("\n") == 1


def test_collect_names_a_missing_pod_resources_socket(samples, tmp_path, validate):
    xml = samples / "nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml"
    socket = tmp_path / "kubelet.sock"
    done = agent(
        "collect",
        "--nvidia-smi-xml",
        str(xml),
        "--hostname",
        "a100",
        "--pod-resources-socket",
        str(socket),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    validate(report)
    assert report["pod_resources"]["available"] is False
    assert str(socket) in report["pod_resources"]["error"]


def test_another_machines_pids_name_no_workload(tmp_path):
    """With --hostname the file is another server's: its pids mean nothing in this /proc."""
    report = {"gpus": [{"index": 0, "uuid": GPU, "pci_bus_id": None}], "warnings": []}
    apps = parse_compute_apps(f"{GPU}, 1, init, 1 MiB\n")
    attach_compute_apps(report, apps, proc_root=None)
    assert report["gpus"][0]["processes"] == [
        {"pid": 1, "name": "init", "used_memory_bytes": MIB, "workload": None}
    ]


def test_a_row_without_a_pid_is_left_out_with_its_line():
    apps = parse_compute_apps(f"{GPU}, [N/A], x, 1 MiB\n{GPU}, 9, y, 2 MiB\n")
    assert [row.pid for row in apps.rows] == [9]
    assert apps.warnings == ["line 1: no pid ('[N/A]'): left out"]
