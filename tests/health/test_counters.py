"""Per-GPU health counters: live NVML (through pynvml's own structures), the fake backend, and
saved nvidia-smi -q -x / -q of every DTD generation, all into one `health` object."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pynvml
import pytest

from agent.collector import collect
from agent.host import SysHost
from agent.nvml import EccLocation, PcieLink, PynvmlBackend, clock_reason_names
from agent.sources.saved import build_saved_report, parse_nvidia_smi
from simulator.fake_nvml import FakeGpu, FakeMachine, FakeNvmlBackend
from tests.agent.conftest import AGENT_FIXTURES, REPO, samples_dir
from tests.agent.test_nvml_backend import StubNvml

HEALTH_FIXTURES = REPO / "tests" / "fixtures" / "health"


class HealthStub(StubNvml):
    """The stub GPUs, with the health calls of a current driver (R570)."""

    fields: dict[int, int | None] = {
        pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: 7,
        pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: 1,
        pynvml.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: 3,
        pynvml.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: 2,
        pynvml.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: 11,
        pynvml.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: None,  # NVML answers an error
        pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: pynvml.NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET,
    }

    def nvmlDeviceGetFieldValues(self, h: Any, ids: list[int]) -> Any:
        values = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for slot, field_id in zip(values, ids, strict=True):
            slot.fieldId = field_id
            value = self.fields.get(field_id)
            if value is None:
                slot.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                continue
            slot.nvmlReturn = pynvml.NVML_SUCCESS
            if field_id == pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
                slot.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                slot.value.uiVal = value
            else:
                slot.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                slot.value.ullVal = value
        return values

    def nvmlDeviceGetMemoryErrorCounter(self, h: Any, kind: int, counter: int, where: int) -> int:
        if where != pynvml.NVML_MEMORY_LOCATION_DRAM:
            raise pynvml.NVMLError_NotSupported()
        corrected = kind == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
        if counter == pynvml.NVML_VOLATILE_ECC:
            return 7 if corrected else 1
        return 5 if corrected else 0

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: Any) -> int:
        return 5

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: Any) -> int:
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: Any) -> int:
        return 8 if h.index == 1 else 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: Any) -> int:
        return 16

    def nvmlDeviceGetPcieReplayCounter(self, h: Any) -> int:
        return 4

    def nvmlDeviceGetPerformanceState(self, h: Any) -> int:
        return 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        return pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonHwSlowdown


def test_live_nvml_reads_every_health_counter(tmp_path, validate_report):
    report = collect(PynvmlBackend(HealthStub()), SysHost(tmp_path))
    validate_report(report)
    health = report["gpus"][0]["health"]
    assert health["ecc_volatile_corrected"] == 7 and health["ecc_volatile_uncorrected"] == 1
    assert health["ecc_locations"] == [
        {"location": "dram", "counter": "volatile", "corrected": 7, "uncorrected": 1},
        {"location": "dram", "counter": "aggregate", "corrected": 5, "uncorrected": 0},
    ]
    assert (health["pcie_link_gen_current"], health["pcie_link_gen_max"]) == (5, 5)
    assert (health["pcie_link_width_current"], health["pcie_link_width_max"]) == (16, 16)
    assert health["pcie_replay_count"] == 4 and health["performance_state"] == 0
    assert health["clock_event_reasons"] == ["sw_power_cap", "hw_slowdown"]
    # CRC is flit + data; recovery errors unknown where NVML answered an error for the field
    assert (health["nvlink_crc_errors"], health["nvlink_replay_errors"]) == (5, 11)
    assert health["nvlink_recovery_errors"] == 0
    assert health["recovery_action"] == "drain_and_reset"
    assert report["gpus"][1]["health"]["pcie_link_width_current"] == 8
    warnings = "\n".join(report["warnings"])
    assert "asks for a GPU reset (drain_and_reset)" in warnings
    assert "PCIe link runs x8 of x16" in warnings


def test_older_bindings_and_drivers_without_the_calls_give_nulls_not_errors(
    tmp_path, validate_report
):
    report = collect(PynvmlBackend(StubNvml()), SysHost(tmp_path))  # none of the health calls
    validate_report(report)
    gpu = report["gpus"][0]
    assert gpu["status"] == "ok"
    health = gpu["health"]
    assert health["recovery_action"] is None and health["pcie_link_gen_current"] is None
    assert health["clock_event_reasons"] is None and health["ecc_locations"] == []


def test_throttle_reasons_of_drivers_before_535_are_read_too(tmp_path):
    class Old(StubNvml):
        def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: Any) -> int:
            return pynvml.nvmlClocksThrottleReasonHwThermalSlowdown | 0x1

    report = collect(PynvmlBackend(Old()), SysHost(tmp_path))
    assert report["gpus"][0]["health"]["clock_event_reasons"] == [
        "gpu_idle",
        "hw_thermal_slowdown",
    ]


def test_clock_reason_names_keep_only_the_reasons_a_report_carries():
    assert clock_reason_names(None) is None
    assert clock_reason_names(0) == []
    assert clock_reason_names(0x1FF) == [
        "gpu_idle",
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ]


def test_fake_backend_gpu_with_errors_reports_them(tmp_path, validate_report):
    sick = FakeGpu(
        uuid="GPU-aaaaaaaa-0000-0000-0000-000000000001",
        pci_bus_id="00000000:19:00.0",
        name="NVIDIA H100 80GB HBM3",
        architecture="Hopper",
        ecc_uncorrected=2,
        ecc_volatile=(0, 2),
        ecc_locations=[EccLocation("dram", "volatile", 0, 2)],
        pcie=PcieLink(5, 5, 8, 16),
        recovery_action="node_reboot",
        performance_state=0,
    )
    machine = FakeMachine(profile="test", hostname="sick", gpus=[sick])
    report = collect(FakeNvmlBackend(machine), SysHost(tmp_path))
    validate_report(report)
    health = report["gpus"][0]["health"]
    assert health["ecc_volatile_uncorrected"] == 2
    assert health["ecc_locations"][0]["location"] == "dram"
    assert health["recovery_action"] == "node_reboot"
    assert any("asks for a reboot of the node" in w for w in report["warnings"])


# -- saved nvidia-smi output ---------------------------------------------------------------


def saved_health(name: str, directory=None) -> list[dict[str, Any]]:
    data = ((directory or samples_dir()) / name).read_bytes()
    report = build_saved_report(smi_log=parse_nvidia_smi(data), hostname="saved")
    return [g["health"] for g in report["gpus"]]


def test_v13_health_xml_newest_spellings():
    (health,) = saved_health("nvsmi-q-x-rtx4000-ada-v13-health-telegraf.xml")
    assert health == {
        "ecc_volatile_corrected": None,  # ECC is off on this board: N/A everywhere
        "ecc_volatile_uncorrected": None,
        "ecc_locations": [],
        "retired_pages_single_bit": None,
        "retired_pages_double_bit": None,
        "pcie_link_gen_current": 1,  # P8: the link saves power, not a fault
        "pcie_link_gen_max": 4,
        "pcie_link_width_current": 16,
        "pcie_link_width_max": 16,
        "pcie_replay_count": 0,
        "performance_state": 8,
        "clock_event_reasons": ["gpu_idle"],
        "nvlink_crc_errors": None,
        "nvlink_replay_errors": None,
        "nvlink_recovery_errors": None,
        "recovery_action": "none",
    }


def test_v11_xml_reads_clocks_throttle_reasons():
    (health,) = saved_health("nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml")
    assert health["clock_event_reasons"] == []  # every reason "Not Active"
    assert health["performance_state"] == 0 and health["pcie_link_gen_current"] == 4
    assert health["recovery_action"] is None  # v11 names none


def test_plain_q_of_a_535_driver_reads_reset_status_and_hw_slowdown():
    healths = saved_health("nvsmi-q-h100x8-gpud.txt")
    assert len(healths) == 8
    first = healths[0]
    assert first["clock_event_reasons"] == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert first["recovery_action"] == "none"  # "Reset Required: No", "Drain and Reset ...: No"
    assert first["pcie_replay_count"] == 67 and first["performance_state"] == 0
    assert (first["ecc_volatile_corrected"], first["ecc_volatile_uncorrected"]) == (0, 0)


def test_plain_q_of_a_590_driver_reads_gpu_recovery_action():
    (health,) = saved_health("nvsmi-q-h100-mig-enabled-utku.txt")
    assert health["recovery_action"] == "none" and health["clock_event_reasons"] == ["gpu_idle"]
    assert health["pcie_replay_count"] == 9


def test_volta_ecc_by_unit_and_retired_pages_by_cause():
    first = saved_health("nvsmi-q-x-edge-cases.xml", AGENT_FIXTURES)[0]
    assert first["ecc_locations"] == [
        {"location": "dram", "counter": "aggregate", "corrected": 3, "uncorrected": 1}
    ]
    assert (first["retired_pages_single_bit"], first["retired_pages_double_bit"]) == (2, 1)


@pytest.mark.parametrize(
    "element, action",
    [
        ("<gpu_recovery_action>Reset</gpu_recovery_action>", "gpu_reset"),
        ("<gpu_recovery_action>Drain and Reset</gpu_recovery_action>", "drain_and_reset"),
        ("<gpu_recovery_action>Reboot</gpu_recovery_action>", "node_reboot"),
        ("<gpu_recovery_action>N/A</gpu_recovery_action>", None),
        (
            "<gpu_reset_status><reset_required>Yes</reset_required>"
            "<drain_and_reset_recommended>No</drain_and_reset_recommended></gpu_reset_status>",
            "gpu_reset",
        ),
        (
            "<gpu_reset_status><reset_required>Yes</reset_required>"
            "<drain_and_reset_recommended>Yes</drain_and_reset_recommended></gpu_reset_status>",
            "drain_and_reset",
        ),
    ],
)
def test_recovery_action_in_every_spelling(element, action):
    xml = (
        "<nvidia_smi_log><driver_version>575.51</driver_version><attached_gpus>1</attached_gpus>"
        f'<gpu id="00000000:19:00.0"><product_name>NVIDIA H100</product_name>{element}'
        "<ecc_errors><volatile><sram_correctable>1</sram_correctable>"
        "<sram_uncorrectable_parity>2</sram_uncorrectable_parity>"
        "<sram_uncorrectable_secded>3</sram_uncorrectable_secded>"
        "<dram_correctable>4</dram_correctable><dram_uncorrectable>5</dram_uncorrectable>"
        "</volatile></ecc_errors></gpu></nvidia_smi_log>"
    )
    report = build_saved_report(smi_log=parse_nvidia_smi(xml), hostname="saved")
    health = report["gpus"][0]["health"]
    assert health["recovery_action"] == action
    assert (health["ecc_volatile_corrected"], health["ecc_volatile_uncorrected"]) == (5, 10)
    assert health["ecc_locations"] == [
        {"location": "sram", "counter": "volatile", "corrected": 1, "uncorrected": 5},
        {"location": "dram", "counter": "volatile", "corrected": 4, "uncorrected": 5},
    ]


# -- the command line ------------------------------------------------------------------------


# A server described by saved nvidia-smi output: the agent's own source, no live NVML needed.
SAVED_SERVER = (
    "--nvidia-smi-xml",
    str(samples_dir() / "nvsmi-q-h100x8-gpud.txt"),
    "--hostname",
    "x",
)


def run_agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_collect_with_a_saved_kernel_log_names_the_gpus_by_their_bus(validate_report):
    run = run_agent(
        "collect",
        "--nvidia-smi-xml",
        str(samples_dir() / "nvsmi-q-h100x8-gpud.txt"),
        "--kernel-log",
        str(samples_dir() / "dmesg-ctime-xid119-gpud.log"),
        "--hostname",
        "dgx-saved",
        "--compact",
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    validate_report(report)
    (event,) = report["events"]
    gpu = next(g for g in report["gpus"] if g["pci_bus_id"] == "0000:9b:00.0")
    assert (event["kind"], event["code"], event["count"]) == ("xid", 119, 5)
    assert event["gpu_uuid"] == gpu["uuid"]


def test_collect_turns_seconds_since_boot_into_times_with_boot_time():
    run = run_agent(
        "collect",
        *SAVED_SERVER,
        "--kernel-log",
        str(HEALTH_FIXTURES / "dmesg.log"),
        "--boot-time",
        "2025-02-23T16:00:00Z",
        "--compact",
    )
    assert run.returncode == 0, run.stderr
    events = json.loads(run.stdout)["events"]
    assert events[0]["time"] == "2025-02-23T16:30:43.411020Z"
    assert [e["kind"] for e in events] == ["xid", "xid", "fallen_off_bus", "probe_failure", "sxid"]


@pytest.mark.parametrize(
    "args, message",
    [
        (("--kernel-log", "/nonexistent/dmesg.log"), "cannot read /nonexistent/dmesg.log"),
        (("--kernel-log", "README.md", "--boot-time", "yesterday"), "--boot-time 'yesterday'"),
    ],
)
def test_bad_kernel_log_options_are_one_line_and_status_2(args, message):
    run = run_agent("collect", *SAVED_SERVER, *args)
    assert run.returncode == 2
    assert message in run.stderr and len(run.stderr.strip().splitlines()) == 1


# One sick H100 as a 550 driver prints it both ways: every health field read alike.
_SICK_XML = """<?xml version="1.0" ?>
<nvidia_smi_log><driver_version>550.54.15</driver_version><attached_gpus>1</attached_gpus>
<gpu id="00000000:19:00.0">
  <product_name>NVIDIA H100 80GB HBM3</product_name>
  <serial>1654922000001</serial>
  <uuid>GPU-5a1c0d3e-0000-4000-8000-000000000019</uuid>
  <pci>
    <pci_bus_id>00000000:19:00.0</pci_bus_id>
    <pci_gpu_link_info>
      <pcie_gen><max_link_gen>5</max_link_gen><current_link_gen>3</current_link_gen></pcie_gen>
      <link_widths><max_link_width>16x</max_link_width><current_link_width>8x</current_link_width>
      </link_widths>
    </pci_gpu_link_info>
    <replay_counter>12</replay_counter>
  </pci>
  <performance_state>P0</performance_state>
  <clocks_event_reasons>
    <clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
    <clocks_event_reason_sw_power_cap>Active</clocks_event_reason_sw_power_cap>
    <clocks_event_reason_hw_slowdown>Active</clocks_event_reason_hw_slowdown>
    <clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown>
    <clocks_event_reason_hw_power_brake_slowdown>Not Active
    </clocks_event_reason_hw_power_brake_slowdown>
    <clocks_event_reason_sw_thermal_slowdown>Not Active</clocks_event_reason_sw_thermal_slowdown>
  </clocks_event_reasons>
  <ecc_errors>
    <volatile>
      <sram_correctable>1</sram_correctable>
      <sram_uncorrectable_parity>0</sram_uncorrectable_parity>
      <sram_uncorrectable_secded>0</sram_uncorrectable_secded>
      <dram_correctable>4</dram_correctable>
      <dram_uncorrectable>2</dram_uncorrectable>
    </volatile>
    <aggregate>
      <sram_correctable>6</sram_correctable>
      <sram_uncorrectable_parity>1</sram_uncorrectable_parity>
      <sram_uncorrectable_secded>0</sram_uncorrectable_secded>
      <dram_correctable>9</dram_correctable>
      <dram_uncorrectable>3</dram_uncorrectable>
    </aggregate>
  </ecc_errors>
  <retired_pages>
    <multiple_single_bit_retirement><retired_count>2</retired_count></multiple_single_bit_retirement>
    <double_bit_retirement><retired_count>1</retired_count></double_bit_retirement>
    <pending_blacklist>Yes</pending_blacklist>
    <pending_retirement>Yes</pending_retirement>
  </retired_pages>
  <remapped_rows>
    <remapped_row_corr>3</remapped_row_corr>
    <remapped_row_unc>1</remapped_row_unc>
    <remapped_row_pending>Yes</remapped_row_pending>
    <remapped_row_failure>No</remapped_row_failure>
  </remapped_rows>
  <gpu_reset_status>
    <reset_required>Yes</reset_required>
    <drain_and_reset_recommended>No</drain_and_reset_recommended>
  </gpu_reset_status>
</gpu>
</nvidia_smi_log>
"""

_SICK_TEXT = """
==============NVSMI LOG==============

Driver Version                            : 550.54.15

Attached GPUs                             : 1
GPU 00000000:19:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Serial Number                         : 1654922000001
    GPU UUID                              : GPU-5a1c0d3e-0000-4000-8000-000000000019
    GPU Reset Status
        Reset Required                    : Yes
        Drain and Reset Recommended       : No
    PCI
        Bus Id                            : 00000000:19:00.0
        GPU Link Info
            PCIe Generation
                Max                       : 5
                Current                   : 3
            Link Width
                Max                       : 16x
                Current                   : 8x
        Replays Since Reset               : 12
    Performance State                     : P0
    Clocks Event Reasons
        Idle                              : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Active
            HW Thermal Slowdown           : Active
            HW Power Brake Slowdown       : Not Active
        SW Thermal Slowdown               : Not Active
    ECC Errors
        Volatile
            SRAM Correctable              : 1
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 4
            DRAM Uncorrectable            : 2
        Aggregate
            SRAM Correctable              : 6
            SRAM Uncorrectable Parity     : 1
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 9
            DRAM Uncorrectable            : 3
    Retired Pages
        Single Bit ECC                    : 2
        Double Bit ECC                    : 1
        Pending Page Blacklist            : Yes
    Remapped Rows
        Correctable Error                 : 3
        Uncorrectable Error               : 1
        Pending                           : Yes
        Remapping Failure Occurred        : No
"""

_GPU_HEALTH_FIELDS = (
    "uuid",
    "serial",
    "pci_bus_id",
    "ecc_errors_corrected",
    "ecc_errors_uncorrected",
    "retired_pages",
    "retired_pages_pending",
    "remapped_rows_correctable",
    "remapped_rows_uncorrectable",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "health",
)


def test_q_and_q_x_of_one_gpu_give_the_same_health(validate_report):
    """The issue's contract: the saved -q and -q -x parsers read the same fields."""
    reports = [
        build_saved_report(smi_log=parse_nvidia_smi(text), hostname="saved")
        for text in (_SICK_XML, _SICK_TEXT)
    ]
    for report in reports:
        validate_report(report)
    from_xml, from_text = ({k: r["gpus"][0][k] for k in _GPU_HEALTH_FIELDS} for r in reports)

    assert from_text == from_xml
    health = from_xml["health"]
    assert (health["ecc_volatile_corrected"], health["ecc_volatile_uncorrected"]) == (5, 2)
    assert health["ecc_locations"] == [
        {"location": "sram", "counter": "volatile", "corrected": 1, "uncorrected": 0},
        {"location": "dram", "counter": "volatile", "corrected": 4, "uncorrected": 2},
        {"location": "sram", "counter": "aggregate", "corrected": 6, "uncorrected": 1},
        {"location": "dram", "counter": "aggregate", "corrected": 9, "uncorrected": 3},
    ]
    assert (from_xml["ecc_errors_corrected"], from_xml["ecc_errors_uncorrected"]) == (15, 4)
    assert (health["retired_pages_single_bit"], health["retired_pages_double_bit"]) == (2, 1)
    assert (from_xml["retired_pages"], from_xml["retired_pages_pending"]) == (3, True)
    assert (from_xml["remapped_rows_correctable"], from_xml["remapped_rows_pending"]) == (3, True)
    assert (health["pcie_link_gen_current"], health["pcie_link_width_current"]) == (3, 8)
    assert (health["pcie_link_gen_max"], health["pcie_link_width_max"]) == (5, 16)
    assert health["clock_event_reasons"] == ["sw_power_cap", "hw_slowdown", "hw_thermal_slowdown"]
    assert health["recovery_action"] == "gpu_reset"
    assert health["nvlink_crc_errors"] is None  # nvidia-smi -q prints no NVLink error counters
