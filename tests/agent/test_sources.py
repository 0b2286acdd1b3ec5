"""Saved nvidia-smi output: the parsers on every real sample and on hand-written edge cases,
and the reports built from them."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from agent.mig import derive_mig_profile
from agent.sources.nvidia_smi_text import parse_nvidia_smi_text
from agent.sources.nvidia_smi_xml import parse_nvidia_smi_xml
from agent.sources.saved import build_saved_report, parse_nvidia_smi
from agent.sources.smi_types import SmiParseError
from agent.sources.topo_matrix import parse_topo_matrix
from agent.sources.values import clean, to_bool, to_bytes

from .conftest import (
    AGENT_FIXTURES,
    AGENT_SAMPLES,
    FIXTURES,
    NVIDIA_SMI_SAMPLES,
    TOPOLOGY_SAMPLES,
    samples_dir,
)

MIB = 1024 * 1024
LIST_LINE = re.compile(r"^\s*MIG\s+(\S+)\s+Device\s+\d+:")


def mig_profiles_of_list(text: str) -> Counter[str]:
    """The MIG profiles `nvidia-smi -L` names (a cross-check for derived names)."""
    return Counter(m.group(1) for line in text.splitlines() if (m := LIST_LINE.match(line)))


def test_repository_copies_match_the_shared_samples():
    shared = samples_dir()
    if shared == FIXTURES / "samples":
        pytest.skip("no shared samples folder beside this clone")
    for name in AGENT_SAMPLES:
        copy = FIXTURES / "samples" / name
        assert copy.read_bytes() == (shared / name).read_bytes(), name


@pytest.mark.parametrize("name", NVIDIA_SMI_SAMPLES)
def test_every_nvidia_smi_sample_gives_a_valid_report(name, sample_bytes, validate):
    log = parse_nvidia_smi(sample_bytes(name))
    assert log.gpus and log.driver_version and log.warnings == []
    report = build_saved_report(smi_log=log, hostname="sample-host", system_uuid="ABC-1")
    validate(report)
    assert report["agent"]["source"] == "nvidia-smi"
    assert report["host"] == {"hostname": "sample-host", "system_uuid": "abc-1"}
    for gpu in report["gpus"]:
        assert gpu["name"] and gpu["pci_bus_id"] and gpu["memory_total_bytes"]


@pytest.mark.parametrize("name", TOPOLOGY_SAMPLES)
def test_every_topology_sample_gives_a_valid_report(name, sample_bytes, validate):
    topo = parse_topo_matrix(sample_bytes(name).decode())
    report = build_saved_report(topology=topo, hostname="sample-host")
    validate(report)
    assert all(g["uuid_synthetic"] for g in report["gpus"])


def test_a100_mig_xml(sample_bytes):
    log = parse_nvidia_smi_xml(sample_bytes("nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml"))
    assert (log.driver_version, log.cuda_version, log.attached_gpus) == ("510.47.03", "11.6", 1)
    (gpu,) = log.gpus
    assert gpu["uuid"] == "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a"
    assert gpu["serial"] == "1324321002473"
    assert gpu["name"] == "NVIDIA A100-SXM4-40GB" and gpu["architecture"] == "Ampere"
    assert gpu["pci_bus_id"] == "0000:00:04.0"
    assert gpu["memory_total_bytes"] == 40960 * MIB
    assert gpu["power_limit_w"] == 400.0
    assert gpu["board_part_number"] == "692-2G506-0200-003"  # DTD v11: in gpu_part_number
    assert gpu["persistence_mode"] is False
    assert (gpu["mig_mode_current"], gpu["mig_mode_pending"]) == (True, True)
    assert gpu["ecc_mode_current"] is True
    assert (gpu["ecc_errors_corrected"], gpu["ecc_errors_uncorrected"]) == (0, 0)
    assert gpu["retired_pages"] is None and gpu["remapped_rows_pending"] is None  # N/A
    migs = gpu["mig_devices"]
    assert [(m["gpu_instance_id"], m["compute_instance_id"]) for m in migs] == [(1, 0), (2, 0)]
    assert [m["profile"] for m in migs] == ["3g.20gb", "3g.20gb"]  # 42 SMs, 19968 MiB
    assert all(m["uuid"] is None and m["sm_count"] == 42 for m in migs)


def test_mig_devices_without_uuids_get_stable_synthetic_ids(sample_bytes, validate):
    data = sample_bytes("nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml")

    def report(host):
        return build_saved_report(smi_log=parse_nvidia_smi(data), hostname=host)

    first, again, other = report("a100-1"), report("a100-1"), report("a100-2")
    validate(first)
    migs = first["gpus"][0]["mig_devices"]
    assert all(m["uuid_synthetic"] and m["uuid"].startswith("MIG-") for m in migs)
    assert len({m["uuid"] for m in migs}) == 2
    assert [m["uuid"] for m in migs] == [m["uuid"] for m in again["gpus"][0]["mig_devices"]]
    # the server identity is part of the id: captures with masked GPU UUIDs cannot collide
    assert [m["uuid"] for m in migs] != [m["uuid"] for m in other["gpus"][0]["mig_devices"]]
    assert first["gpus"][0].get("uuid_synthetic") is None


def test_blackwell_v13_xml(sample_bytes):
    log = parse_nvidia_smi_xml(sample_bytes("nvsmi-q-x-rtxpro6000-blackwell-v13-telegraf.xml"))
    (gpu,) = log.gpus
    assert gpu["name"] == "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"
    assert gpu["architecture"] == "Blackwell"
    assert gpu["board_part_number"] == "900-5G153-2200-000"  # not the chip's gpu_part_number
    assert gpu["power_limit_w"] == 300.0  # gpu_power_readings/current_power_limit
    assert gpu["memory_total_bytes"] == 97887 * MIB
    assert gpu["mig_mode_current"] is None and "mig_devices" not in gpu
    assert gpu["ecc_mode_current"] is False and gpu["ecc_errors_corrected"] is None
    assert gpu["remapped_rows_correctable"] == 0 and gpu["remapped_rows_failure"] is False
    assert gpu["pci_bus_id"] == "0000:61:00.0"


def test_h100_mig_text_with_masked_uuid(sample_bytes, validate):
    log = parse_nvidia_smi_text(sample_bytes("nvsmi-q-h100-mig-enabled-utku.txt"))
    assert (log.driver_version, log.cuda_version) == ("590.48.01", "13.1")
    (gpu,) = log.gpus
    assert gpu["uuid"] is None and gpu["serial"] is None  # masked to zeros by the publisher
    assert gpu["board_part_number"] == "692-2G520-0200-000"
    profiles = Counter(m["profile"] for m in gpu["mig_devices"])
    # the same layout `nvidia-smi -L` shows on NVIDIA's H100 mixed-MIG example
    assert profiles == mig_profiles_of_list(
        sample_bytes("nvsmi-L-h100-mig-mixed-nvdocs.txt").decode()
    )
    assert [m["gpu_instance_id"] for m in gpu["mig_devices"]] == [2, 3, 9, 10]
    report = build_saved_report(smi_log=log, hostname="h100-vm", system_uuid="1234")
    validate(report)
    assert report["gpus"][0]["uuid_synthetic"] is True
    assert len({m["uuid"] for m in report["gpus"][0]["mig_devices"]}) == 4


def test_h100x8_text(sample_bytes):
    log = parse_nvidia_smi_text(sample_bytes("nvsmi-q-h100x8-gpud.txt"))
    assert (log.driver_version, log.attached_gpus, len(log.gpus)) == ("535.161.08", 8, 8)
    assert [g["pci_bus_id"][5:7] for g in log.gpus] == [
        "19",
        "3b",
        "4c",
        "5d",
        "9b",
        "bb",
        "cb",
        "db",
    ]
    assert len({g["uuid"] for g in log.gpus}) == 8 and len({g["serial"] for g in log.gpus}) == 8
    gpu = log.gpus[0]
    assert gpu["uuid"] == "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"
    assert gpu["serial"] == "1650124031592" and gpu["vbios_version"] == "96.00.74.00.0D"
    assert gpu["power_limit_w"] == 700.0 and gpu["memory_total_bytes"] == 81559 * MIB
    assert (gpu["mig_mode_current"], gpu["persistence_mode"]) == (False, True)
    assert gpu["remapped_rows_correctable"] == 0 and gpu["remapped_rows_pending"] is False
    assert (gpu["ecc_errors_corrected"], gpu["ecc_errors_uncorrected"]) == (0, 0)


def test_a100_list_sample_profiles_are_what_the_table_derives(sample_bytes):
    """nvidia-smi -L on an A100-40GB names 3g.20gb, 2g.10gb, 1g.5gb; NVIDIA's published sizes
    for those profiles derive back to the same names."""
    listed = mig_profiles_of_list(
        sample_bytes("nvsmi-L-a100-40gb-mig-mixed-driver450-nvdocs.txt").decode()
    )
    assert listed == Counter({"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1})
    derived = Counter(
        derive_mig_profile("A100-SXM4-40GB", "Ampere", memory, sms)
        for memory, sms in ((19968, 42), (9856, 28), (4864, 14))
    )
    assert derived == listed


def test_edge_case_xml(validate):
    data = (AGENT_FIXTURES / "nvsmi-q-x-edge-cases.xml").read_bytes()
    log = parse_nvidia_smi_xml(data)
    assert len(log.gpus) == 2, "the GPUs are those the file holds"
    assert "3 GPUs are attached" in log.warnings[0]
    v100, h100 = log.gpus
    assert v100["mig_mode_current"] is None and v100["mig_mode_pending"] is None  # [N/A]
    assert v100["power_limit_w"] == 300.0  # enforced limit [Not Supported]: the plain one
    assert (v100["ecc_errors_corrected"], v100["ecc_errors_uncorrected"]) == (3, 1)
    assert v100["retired_pages"] == 3 and v100["retired_pages_pending"] is True
    assert v100["board_part_number"] == "900-2G503-0430-000"
    assert v100["remapped_rows_correctable"] is None
    assert h100["uuid"] is None and h100["serial"] is None
    assert h100["board_part_number"] == "692-2G520-0200-000"
    assert h100["power_limit_w"] == 700.0
    assert (h100["remapped_rows_uncorrectable"], h100["remapped_rows_pending"]) == (1, True)
    assert [m["profile"] for m in h100["mig_devices"]] == ["1c.3g.40gb"] * 3 + ["4g.40gb"]
    report = build_saved_report(smi_log=log, hostname="edge")
    validate(report)
    assert report["gpus"][1]["uuid_synthetic"] is True
    assert any("retired pages pending" in w for w in report["warnings"])
    assert any("row remapping pending" in w for w in report["warnings"])
    assert any("persistence mode is off" in w for w in report["warnings"])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not xml at all", "not well-formed"),
        (b"<?xml version='1.0'?><html/>", "not <nvidia_smi_log>"),
        (
            b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log/>',
            "entity",
        ),
    ],
)
def test_xml_that_is_not_nvidia_smi_is_refused(data, message):
    with pytest.raises(SmiParseError, match=message):
        parse_nvidia_smi_xml(data)


def test_text_that_is_not_nvidia_smi_is_refused():
    with pytest.raises(SmiParseError):
        parse_nvidia_smi_text("hello\nworld\n")


def test_older_text_labels():
    text = """
==============NVSMI LOG==============

Driver Version                      : 450.80.02
Attached GPUs                       : 1
GPU 00000000:07:00.0
    Product Name                    : A100-SXM4-40GB
    Persistence Mode                : Enabled
    Serial Number                   : 1563620016431
    GPU UUID                        : GPU-4200ccc0-2667-d4cb-9137-f932c716232a
    PCI
        Bus Id                      : 00000000:07:00.0
    FB Memory Usage
        Total                       : 40537 MiB
    Retired Pages
        Single Bit ECC              : 1
        Double Bit ECC              : 0
        Pending Page Blacklist      : No
    Power Readings
        Power Limit                 : 400.00 W
"""
    (gpu,) = parse_nvidia_smi_text(text).gpus
    assert gpu["uuid"] == "GPU-4200ccc0-2667-d4cb-9137-f932c716232a"
    assert gpu["power_limit_w"] == 400.0 and gpu["retired_pages"] == 1
    assert gpu["retired_pages_pending"] is False and gpu["pci_bus_id"] == "0000:07:00.0"


# -- topo -m ----------------------------------------------------------------------------------


def test_topology_with_ansi_escapes(sample_bytes):
    topo = parse_topo_matrix(sample_bytes("topo-1xl40s-ansi-escapes-utku.txt").decode())
    assert [(g.index, g.cpu_affinity, g.numa_node) for g in topo.gpus] == [(0, "0-7", 0)]
    assert topo.nics == [] and topo.links == [] and topo.warnings == []


def test_topology_8xh20_nv18_and_nic_legend(sample_bytes):
    topo = parse_topo_matrix(sample_bytes("topo-8xh20-nv18-ibp-nics.txt").decode())
    assert topo.nics == ["ibp14s0", "ibp71s0", "ibp134s0", "ibp195s0", "rocep32s0f0"]
    links = {(a, b): c for a, b, c in topo.links}
    gpu_pairs = {k: v for k, v in links.items() if k[1].startswith("gpu:")}
    assert len(gpu_pairs) == 28 and set(gpu_pairs.values()) == {"NV18"}
    assert links[("gpu:0", "nic:ibp14s0")] == "PIX"
    assert links[("gpu:2", "nic:ibp71s0")] == "PIX"
    assert links[("gpu:4", "nic:ibp134s0")] == "PIX"
    assert links[("gpu:0", "nic:ibp134s0")] == "SYS"
    assert links[("gpu:0", "nic:rocep32s0f0")] == "NODE"
    assert links[("nic:ibp14s0", "nic:ibp71s0")] == "NODE"
    assert len(links) == 28 + 8 * 5 + 10
    assert [g.cpu_affinity for g in topo.gpus[3:5]] == ["0-47,96-143", "48-95,144-191"]
    assert [g.numa_node for g in topo.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_topology_legacy_header_with_nic_names_and_soc():
    topo = parse_topo_matrix((AGENT_FIXTURES / "topo-4gpu-legacy-mlx-header.txt").read_text())
    links = {(a, b): c for a, b, c in topo.links}
    assert topo.nics == ["mlx5_0", "mlx5_1"]
    assert links[("gpu:0", "gpu:1")] == "NV2"
    assert links[("gpu:0", "gpu:2")] == "SYS"  # SOC, the old name
    assert links[("gpu:2", "nic:mlx5_1")] == "PXB"
    assert [g.cpu_affinity for g in topo.gpus] == ["0-13,28-41"] * 2 + ["14-27,42-55"] * 2
    assert all(g.numa_node is None for g in topo.gpus)  # no NUMA column in old drivers


def test_topology_unknown_class_is_a_warning_not_a_failure():
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tC2C\t0-7\nGPU1\tC2C\t X \t0-7\n"
    topo = parse_topo_matrix(text)
    assert topo.links == [] and "C2C" in topo.warnings[0]


def test_text_without_a_matrix_is_refused():
    with pytest.raises(SmiParseError):
        parse_topo_matrix("Legend:\n  X = Self\n")


# -- reports from saved files -----------------------------------------------------------------


def test_topology_only_report_has_stable_synthetic_uuids(sample_bytes, validate):
    text = sample_bytes("topo-8xh20-nv18-ibp-nics.txt").decode()
    first = build_saved_report(topology=parse_topo_matrix(text), hostname="h20-1", system_uuid="U1")
    second = build_saved_report(
        topology=parse_topo_matrix(text), hostname="h20-1", system_uuid="U1"
    )
    other = build_saved_report(topology=parse_topo_matrix(text), hostname="h20-2", system_uuid="U2")
    validate(first)
    uuids = [g["uuid"] for g in first["gpus"]]
    assert len(set(uuids)) == 8 and all(u.startswith("GPU-") for u in uuids)
    assert uuids == [g["uuid"] for g in second["gpus"]]
    assert not set(uuids) & {g["uuid"] for g in other["gpus"]}
    assert [n["name"] for n in first["nics"]] == sorted(
        ["ibp14s0", "ibp71s0", "ibp134s0", "ibp195s0", "rocep32s0f0"]
    )
    assert first["gpus"][5]["numa_node"] == 1 and first["driver"] is None


def test_xml_and_topology_together(sample_bytes, validate):
    log = parse_nvidia_smi(sample_bytes("nvsmi-q-h100x8-gpud.txt"))
    topo = parse_topo_matrix(sample_bytes("topo-8xh20-nv18-ibp-nics.txt").decode())
    report = build_saved_report(smi_log=log, topology=topo, hostname="dgx-1", system_uuid="S")
    validate(report)
    assert report["gpus"][0]["uuid"] == "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"
    assert report["gpus"][0]["cpu_affinity"] == "0-47,96-143"
    assert report["gpus"][0].get("uuid_synthetic") is None
    assert sum(1 for link in report["links"] if link["link_class"] == "NV18") == 28
    assert report["driver"]["driver_version"] == "535.161.08"


def test_different_gpu_counts_in_the_two_files_are_flagged(sample_bytes):
    log = parse_nvidia_smi(sample_bytes("nvsmi-q-x-a100-sxm4-40gb-mig-netdata.xml"))
    topo = parse_topo_matrix(sample_bytes("topo-8xh20-nv18-ibp-nics.txt").decode())
    report = build_saved_report(smi_log=log, topology=topo, hostname="mixed")
    assert any("topo -m shows 8 GPUs" in w for w in report["warnings"])
    assert all(
        int(end[4:]) == 0
        for link in report["links"]
        for end in (link["a"], link["b"])
        if end.startswith("gpu:")
    )


def test_values():
    assert clean("[N/A]") is None and clean("Not Supported") is None and clean(" 7 ") == "7"
    assert clean("Requested functionality has been deprecated") is None
    assert to_bytes("81559 MiB") == 81559 * MIB and to_bytes("2 GiB") == 2 * 1024**3
    assert to_bytes("N/A") is None and to_bytes("12") == 12 * MIB
    assert to_bool("Enabled") is True and to_bool("No") is False and to_bool("N/A") is None
