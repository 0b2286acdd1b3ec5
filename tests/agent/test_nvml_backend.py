"""The real NVML backend (PynvmlBackend): against the real bindings without a library, and
against an injected stand-in for the pynvml module that answers like a driver would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from agent.collector import collect
from agent.host import SysHost
from agent.nvml import (
    NvmlError,
    NvmlUnavailableError,
    PynvmlBackend,
    cpu_list,
    format_cuda_version,
    parse_cpu_list,
)

from .conftest import AGENT_FIXTURES, REPO


class StubNvml:
    """Enough of pynvml's surface for the backend: two GPUs, the second in MIG mode.

    Error classes and constants are the real ones; `fail` maps function names to the
    pynvml error class they raise; `calls` counts every call.
    """

    def __init__(self, fail: dict[str, type[pynvml.NVMLError]] | None = None) -> None:
        for name in dir(pynvml):
            if name.startswith(("NVML_", "NVMLError")):
                setattr(self, name, getattr(pynvml, name))
        self.fail = dict(fail or {})
        self.calls: Counter[str] = Counter()
        self.gpus = [SimpleNamespace(index=0, mig=False), SimpleNamespace(index=1, mig=True)]
        self.migs = [
            SimpleNamespace(gi=2, ci=0, uuid="MIG-aaaa", sms=60, mem_mb=40448, ci_slices=3),
            SimpleNamespace(gi=9, ci=0, uuid="MIG-bbbb", sms=16, mem_mb=9984, ci_slices=1),
            SimpleNamespace(gi=3, ci=1, uuid="MIG-cccc", sms=16, mem_mb=20096, ci_slices=1),
        ]

    def __getattribute__(self, name: str) -> Any:
        attr = object.__getattribute__(self, name)
        if name.startswith("nvml") and callable(attr):
            fail = object.__getattribute__(self, "fail")
            calls = object.__getattribute__(self, "calls")

            def wrapped(*args: Any) -> Any:
                calls[name] += 1
                if name in fail:
                    raise fail[name]()
                return attr(*args)

            return wrapped
        return attr

    # system
    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlSystemGetNVMLVersion(self) -> bytes:
        return b"12.550.54.15"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return self.gpus[index]

    # identity
    def nvmlDeviceGetUUID(self, h: Any) -> str:
        if hasattr(h, "gi"):
            return h.uuid
        return f"GPU-0000000{h.index}-1111-2222-3333-444444444444"

    def nvmlDeviceGetSerial(self, h: Any) -> str:
        return f"165012400000{h.index}"

    def nvmlDeviceGetName(self, h: Any) -> str:
        if hasattr(h, "gi"):
            return f"NVIDIA H100 80GB HBM3 MIG {h.ci_slices}g.x"
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetBoardPartNumber(self, h: Any) -> bytes:
        return b"692-2G520-0200-000\x00"

    def nvmlDeviceGetArchitecture(self, h: Any) -> int:
        return pynvml.NVML_DEVICE_ARCH_HOPPER

    def nvmlDeviceGetCudaComputeCapability(self, h: Any) -> tuple[int, int]:
        return (9, 0)

    def nvmlDeviceGetPciInfo(self, h: Any) -> Any:
        return SimpleNamespace(busId=f"00000000:{0x19 + h.index * 0x22:02X}:00.0".encode())

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        if hasattr(h, "gi"):
            return SimpleNamespace(total=h.mem_mb * 1024 * 1024)
        return SimpleNamespace(total=81559 * 1024 * 1024)

    def nvmlDeviceGetPowerManagementLimit(self, h: Any) -> int:
        return 700000

    def nvmlDeviceGetVbiosVersion(self, h: Any) -> str:
        return "96.00.74.00.0D"

    def nvmlDeviceGetNumaNodeId(self, h: Any) -> int:
        raise pynvml.NVMLError_NotSupported()

    def nvmlDeviceGetCpuAffinity(self, h: Any, words: int) -> list[int]:
        # CPUs 0-3 and 64-65: bits across two 64-bit words
        return [0b1111, 0b11] + [0] * (words - 2)

    def nvmlDeviceGetPersistenceMode(self, h: Any) -> int:
        return 1

    def nvmlDeviceGetMigMode(self, h: Any) -> list[int]:
        return [1, 1] if h.mig else [0, 0]

    def nvmlDeviceGetEccMode(self, h: Any) -> list[int]:
        return [1, 1]

    def nvmlDeviceGetTotalEccErrors(self, h: Any, kind: int, counter: int) -> int:
        assert counter == pynvml.NVML_AGGREGATE_ECC
        return 5 if kind == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else 0

    def nvmlDeviceGetRetiredPages(self, h: Any, cause: int) -> list[int]:
        raise pynvml.NVMLError_NotSupported()

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: Any) -> int:
        raise pynvml.NVMLError_NotSupported()

    def nvmlDeviceGetRemappedRows(self, h: Any) -> tuple[int, int, int, int]:
        return (2, 0, 1, 0)

    # NVLink: GPU 0 has 4 links (link 2 down) to GPU 1; probing link 4 is invalid
    def nvmlDeviceGetNvLinkState(self, h: Any, link: int) -> int:
        if link >= 4:
            raise pynvml.NVMLError_InvalidArgument()
        return 0 if (link == 2 and h.index == 0) else 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: Any, link: int) -> Any:
        peer = 1 - h.index
        return SimpleNamespace(busId=f"00000000:{0x19 + peer * 0x22:02X}:00.0".encode())

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: Any, link: int) -> int:
        return pynvml.NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetTopologyCommonAncestor(self, a: Any, b: Any) -> int:
        return pynvml.NVML_TOPOLOGY_SYSTEM

    # MIG
    def nvmlDeviceGetMaxMigDeviceCount(self, h: Any) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Any, index: int) -> Any:
        if index >= len(self.migs):
            raise pynvml.NVMLError_NotFound()
        return self.migs[index]

    def nvmlDeviceGetGpuInstanceId(self, mig: Any) -> int:
        return mig.gi

    def nvmlDeviceGetComputeInstanceId(self, mig: Any) -> int:
        return mig.ci

    def nvmlDeviceGetAttributes(self, mig: Any) -> Any:
        gi_slices = {2: 3, 9: 1, 3: 2}[mig.gi]
        return SimpleNamespace(
            multiprocessorCount=mig.sms,
            memorySizeMB=mig.mem_mb,
            gpuInstanceSliceCount=gi_slices,
            computeInstanceSliceCount=mig.ci_slices if mig.gi != 3 else 1,
        )

    _GI_PROFILES = {  # profile index -> (id, name, slices)
        pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE: (19, "MIG 1g.10gb", 1),
        pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE: (14, "MIG 2g.20gb", 2),
        pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE: (9, "MIG 3g.40gb", 3),
    }
    _GI_BY_ID = {2: (9, 4, 4), 9: (19, 2, 1), 3: (14, 0, 2)}  # gi -> (profile id, start, size)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, h: Any, profile: int) -> Any:
        if profile not in self._GI_PROFILES:
            raise pynvml.NVMLError_NotSupported()
        pid, name, slices = self._GI_PROFILES[profile]
        return SimpleNamespace(id=pid, name=name.encode(), sliceCount=slices)

    def nvmlDeviceGetGpuInstanceById(self, h: Any, gi: int) -> Any:
        return SimpleNamespace(gi=gi)

    def nvmlGpuInstanceGetInfo(self, gi: Any) -> Any:
        pid, start, size = self._GI_BY_ID[gi.gi]
        return SimpleNamespace(profileId=pid, placement=SimpleNamespace(start=start, size=size))

    # processes: GPU 0 runs two; on the MIG GPU, MIG-bbbb runs one, and the parent lists it too
    _NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        if hasattr(h, "gi"):
            if h.uuid == "MIG-bbbb":
                return [SimpleNamespace(pid=7001, usedGpuMemory=512 << 20)]
            return []
        if h.mig:
            return [SimpleNamespace(pid=7001, usedGpuMemory=None)]
        return [
            SimpleNamespace(pid=4243, usedGpuMemory=self._NOT_AVAILABLE),
            SimpleNamespace(pid=4242, usedGpuMemory=1 << 30),
        ]


def test_without_the_nvml_library_init_says_why():
    """No driver on this machine: the real bindings raise NVMLError_LibraryNotFound."""
    backend = PynvmlBackend()
    with pytest.raises(NvmlUnavailableError) as caught:
        backend.init()
    assert "NVML Shared Library Not Found" in str(caught.value)
    assert caught.value.kind == "NVMLError_LibraryNotFound"
    backend.shutdown()  # after a failed init: nothing to do, no error


def test_real_backend_path_without_library_reports_nvml_error(tmp_path, validate):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/hostname").write_text("gpu-without-driver\n")
    report = collect(PynvmlBackend(), SysHost(tmp_path))
    validate(report)
    assert report["gpus"] == [] and report["agent"]["source"] == "nvml"
    assert "NVML Shared Library Not Found" in report["nvml_error"]
    assert report["host"]["hostname"] == "gpu-without-driver"


def test_stub_walk_maps_every_fact(tmp_path, validate):
    stub = StubNvml()
    report = collect(PynvmlBackend(stub), SysHost(tmp_path))
    validate(report)
    assert report["driver"] == {
        "driver_version": "550.54.15",
        "cuda_version": "12.4",
        "nvml_version": "12.550.54.15",
    }
    gpu = report["gpus"][0]
    assert gpu["pci_bus_id"] == "0000:19:00.0"
    assert gpu["architecture"] == "Hopper" and gpu["compute_capability"] == "9.0"
    assert gpu["board_part_number"] == "692-2G520-0200-000"
    assert gpu["power_limit_w"] == 700.0
    assert gpu["cpu_affinity"] == "0-3,64-65"
    assert gpu["numa_node"] is None  # NotSupported, and no sysfs entry in this empty root
    assert gpu["retired_pages"] is None and gpu["retired_pages_pending"] is None
    assert gpu["ecc_errors_corrected"] == 5 and gpu["ecc_errors_uncorrected"] == 0
    assert (gpu["remapped_rows_correctable"], gpu["remapped_rows_pending"]) == (2, True)
    assert [link["active"] for link in gpu["nvlinks"]] == [True, True, False, True]
    assert gpu["nvlinks"][0]["remote_pci_bus_id"] == "0000:3b:00.0"
    assert report["links"] == [{"a": "gpu:0", "b": "gpu:1", "link_class": "NV4"}]
    assert report["nvswitch_count"] == 0
    assert any("row remapping pending" in w for w in report["warnings"])


def test_compute_processes_map_to_pids_and_bytes_and_mig_devices(tmp_path, validate):
    report = collect(PynvmlBackend(StubNvml()), SysHost(tmp_path))
    validate(report)
    plain, mig = report["gpus"]
    assert [(p["pid"], p["used_memory_bytes"]) for p in plain["processes"]] == [
        (4242, 1 << 30),
        (4243, None),  # NVML_VALUE_NOT_AVAILABLE
    ]
    assert all(p["workload"] is None and p["name"] is None for p in plain["processes"])
    assert mig["processes"] == []  # the parent's list holds only what runs on a MIG device
    by_uuid = {d["uuid"]: d["processes"] for d in mig["mig_devices"]}
    assert by_uuid == {
        "MIG-aaaa": [],
        "MIG-bbbb": [{"pid": 7001, "name": None, "used_memory_bytes": 512 << 20, "workload": None}],
        "MIG-cccc": [],
    }


@pytest.mark.parametrize(
    "error",
    [
        pynvml.NVMLError_NotSupported,
        pynvml.NVMLError_NoPermission,
        pynvml.NVMLError_FunctionNotFound,
        pynvml.NVMLError_Unknown,
    ],
)
def test_a_failed_process_listing_is_a_warning_not_a_failed_gpu(tmp_path, validate, error):
    stub = StubNvml(fail={"nvmlDeviceGetComputeRunningProcesses": error})
    report = collect(PynvmlBackend(stub), SysHost(tmp_path))
    validate(report)
    for gpu in report["gpus"]:
        assert gpu["status"] == "ok" and gpu["processes"] is None
        assert all(d["processes"] is None for d in gpu.get("mig_devices", []))
    assert sum("compute processes unreadable" in w for w in report["warnings"]) == 2


def test_mig_devices_get_profile_names_and_placements(tmp_path):
    report = collect(PynvmlBackend(StubNvml()), SysHost(tmp_path))
    migs = report["gpus"][1]["mig_devices"]
    assert [(m["gpu_instance_id"], m["compute_instance_id"]) for m in migs] == [
        (2, 0),
        (3, 1),
        (9, 0),
    ]
    by_gi = {m["gpu_instance_id"]: m for m in migs}
    assert by_gi[2]["profile"] == "3g.40gb" and by_gi[2]["uuid"] == "MIG-aaaa"
    assert (by_gi[2]["placement_start"], by_gi[2]["placement_size"]) == (4, 4)
    assert by_gi[2]["sm_count"] == 60 and by_gi[2]["memory_bytes"] == 40448 * 1024 * 1024
    assert by_gi[3]["profile"] == "1c.2g.20gb"  # a compute instance smaller than its GI
    assert by_gi[9]["profile"] == "1g.10gb"
    assert "mig_devices" not in report["gpus"][0]


def test_mig_profile_falls_back_to_the_device_name_without_privileges(tmp_path):
    stub = StubNvml(fail={"nvmlDeviceGetGpuInstanceById": pynvml.NVMLError_NoPermission})
    migs = collect(PynvmlBackend(stub), SysHost(tmp_path))["gpus"][1]["mig_devices"]
    assert [m["profile"] for m in migs] == ["3g.x", "1g.x", "1g.x"]
    assert {m["placement_start"] for m in migs} == {None}


@pytest.mark.parametrize(
    "error",
    [
        pynvml.NVMLError_NotSupported,
        pynvml.NVMLError_NoPermission,
        pynvml.NVMLError_FunctionNotFound,
    ],
)
def test_unsupported_answers_become_null(tmp_path, validate, error):
    names = [
        "nvmlDeviceGetSerial",
        "nvmlDeviceGetBoardPartNumber",
        "nvmlDeviceGetPowerManagementLimit",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetEccMode",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetNvLinkState",
        "nvmlDeviceGetCpuAffinity",
        "nvmlSystemGetNVMLVersion",
    ]
    report = collect(PynvmlBackend(StubNvml(fail=dict.fromkeys(names, error))), SysHost(tmp_path))
    validate(report)
    gpu = report["gpus"][0]
    assert gpu["status"] == "ok"
    for field in (
        "serial",
        "board_part_number",
        "power_limit_w",
        "memory_total_bytes",
        "ecc_mode_current",
        "ecc_errors_corrected",
        "remapped_rows_correctable",
        "mig_mode_current",
        "cpu_affinity",
    ):
        assert gpu[field] is None, field
    assert gpu["nvlinks"] == []
    assert report["driver"]["nvml_version"] is None


def test_a_lost_gpu_becomes_an_error_entry(tmp_path, validate):
    stub = StubNvml(fail={"nvmlDeviceGetVbiosVersion": pynvml.NVMLError_GpuIsLost})
    report = collect(PynvmlBackend(stub), SysHost(tmp_path))
    validate(report)
    assert [g["status"] for g in report["gpus"]] == ["error", "error"]
    assert report["gpus"][0]["error"] == "GPU is lost (while reading vbios_version)"
    assert report["gpus"][0]["power_limit_w"] == 700.0  # read before the failure


def test_init_once_and_handles_cached_across_cycles(tmp_path):
    stub = StubNvml()
    backend = PynvmlBackend(stub)
    for _ in range(3):
        collect(backend, SysHost(tmp_path))
    assert stub.calls["nvmlInit"] == 1
    assert stub.calls["nvmlDeviceGetHandleByIndex"] == 2  # once per GPU, not per cycle
    # link counts are learned once: later cycles stop at the known last link
    assert stub.calls["nvmlDeviceGetNvLinkState"] == 2 * 5 + 2 * 2 * 4
    backend.shutdown()
    assert stub.calls["nvmlShutdown"] == 1


def test_handles_refetched_when_the_gpu_count_changes(tmp_path):
    stub = StubNvml()
    backend = PynvmlBackend(stub)
    collect(backend, SysHost(tmp_path))
    stub.gpus.pop()
    report = collect(backend, SysHost(tmp_path))
    assert len(report["gpus"]) == 1
    assert stub.calls["nvmlDeviceGetHandleByIndex"] == 3


def test_unknown_nvml_error_is_raised_as_nvml_error():
    backend = PynvmlBackend(StubNvml(fail={"nvmlDeviceGetUUID": pynvml.NVMLError_Unknown}))
    backend.init()
    with pytest.raises(NvmlError) as caught:
        backend.uuid(backend.handle(0))
    assert caught.value.kind == "NVMLError_Unknown" and caught.value.call == "nvmlDeviceGetUUID"


def test_cpu_lists_round_trip():
    assert cpu_list([0, 1, 2, 3, 8, 9, 11]) == "0-3,8-9,11"
    assert parse_cpu_list("0-3,8-9,11") == [0, 1, 2, 3, 8, 9, 11]
    assert parse_cpu_list("N/A") is None and cpu_list([]) is None
    assert format_cuda_version(12020) == "12.2" and format_cuda_version(None) is None


def test_real_bindings_against_a_stub_library(tmp_path, validate):
    """The real pynvml (ctypes) loads a stub libnvidia-ml.so.1 built here: the whole live
    path runs, missing functions answer FunctionNotFound (null), a lost GPU is an entry."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to build the stub NVML library")
    library = tmp_path / "lib"
    library.mkdir()
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-o",
            str(library / "libnvidia-ml.so.1"),
            str(AGENT_FIXTURES / "libnvidia-ml-stub.c"),
        ],
        check=True,
        capture_output=True,
    )
    root = tmp_path / "root"
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/hostname").write_text("stub-gpu-host\n")
    (root / "proc/4242").mkdir()
    (root / "proc/4242/comm").write_text("python\n")
    (root / "proc/4242/cgroup").write_text("4:memory:/slurm/uid_1000/job_77/step_batch/task_0\n")
    env = {**os.environ, "LD_LIBRARY_PATH": str(library)}
    done = subprocess.run(
        [sys.executable, "-m", "agent", "collect", "--root", str(root)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    validate(report)
    assert report["nvml_error"] is None and report["agent"]["source"] == "nvml"
    assert report["driver"] == {
        "driver_version": "999.99.99",
        "cuda_version": "12.8",
        "nvml_version": None,
    }
    first, second = report["gpus"]
    assert first["uuid"] == "GPU-c0ffee00-0000-4000-8000-000000000000"
    assert first["name"] == "NVIDIA Stub GPU" and first["serial"] is None
    assert first["pci_bus_id"] == "0000:19:00.0" and first["memory_total_bytes"] == 1 << 34
    assert first["power_limit_w"] == 300.0 and first["vbios_version"] == "96.00.00.00.01"
    assert first["mig_mode_current"] is None and first["nvlinks"] == []  # FunctionNotFound
    assert first["status"] == "ok"
    assert second["status"] == "error"
    assert second["error"] == "GPU is lost (while reading vbios_version)"
    # an older driver's _v2 process call, each pid's job from the root's /proc
    assert first["processes"] == [
        {
            "pid": 4242,
            "name": "python",
            "used_memory_bytes": 1 << 30,
            "workload": {"scheduler": "slurm", "id": "77", "step": "batch"},
        },
        {"pid": 4343, "name": None, "used_memory_bytes": None, "workload": None},
    ]
    assert second["processes"] is None  # lost before: no second warning
    assert not any("compute processes" in w for w in report["warnings"])
    assert report["links"] == [{"a": "gpu:0", "b": "gpu:1", "link_class": "PHB"}]


def test_a_driver_upgrade_under_a_running_agent_starts_a_new_nvml_session(tmp_path):
    stub = StubNvml(fail={"nvmlDeviceGetCount": pynvml.NVMLError_LibRmVersionMismatch})
    backend = PynvmlBackend(stub)
    report = collect(backend, SysHost(tmp_path))
    assert report["gpus"] == [] and "version mismatch" in report["nvml_error"]
    assert stub.calls["nvmlShutdown"] == 1
    del stub.fail["nvmlDeviceGetCount"]  # the agent keeps running; the new driver is loaded
    report = collect(backend, SysHost(tmp_path))
    assert report["nvml_error"] is None and len(report["gpus"]) == 2
    assert stub.calls["nvmlInit"] == 2
