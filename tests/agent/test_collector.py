"""The collector on every fake profile: GPU fields, MIG devices, every pair's link class, NICs."""

from __future__ import annotations

import itertools
import re

import pytest

from agent.collector import finish
from simulator.fake_nvml import FakeNvmlBackend
from simulator.profiles import PROFILES, build

UUID_RE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def links_between(report, kind_a="gpu", kind_b="gpu"):
    return {
        (link["a"], link["b"]): link["link_class"]
        for link in report["links"]
        if link["a"].startswith(kind_a + ":") and link["b"].startswith(kind_b + ":")
    }


def gpu_pair_classes(report):
    pairs = links_between(report)
    indexes = [g["index"] for g in report["gpus"]]
    expected_pairs = {(f"gpu:{a}", f"gpu:{b}") for a, b in itertools.combinations(indexes, 2)}
    assert set(pairs) == expected_pairs, "every GPU pair has exactly one link"
    return pairs


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_profile_report_validates_against_the_schema(profile, profile_report, validate):
    validate(profile_report(profile))


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_equal_facts_give_an_equal_report(profile, profile_report):
    first, second = profile_report(profile), profile_report(profile)
    first.pop("collected_at")
    second.pop("collected_at")
    assert first == second  # the backend answers an unchanged report with a cheap heartbeat


def test_h100_gpu_fields(profile_report):
    report = profile_report("h100")
    assert report["agent"] == {"version": report["agent"]["version"], "source": "simulator"}
    assert report["nvml_error"] is None
    assert report["driver"] == {
        "driver_version": "535.161.08",
        "cuda_version": "12.2",
        "nvml_version": "12.535.161.08",
    }
    gpus = report["gpus"]
    assert [g["index"] for g in gpus] == list(range(8))
    assert len({g["uuid"] for g in gpus}) == 8
    gpu = gpus[0]
    assert UUID_RE.match(gpu["uuid"])
    assert gpu["status"] == "ok" and gpu["error"] is None
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["pci_bus_id"] == "0000:19:00.0"  # NVML's 00000000:19:00.0, normalised
    assert gpu["memory_total_bytes"] == 81559 * 1024 * 1024
    assert gpu["power_limit_w"] == 700.0
    assert gpu["compute_capability"] == "9.0"
    assert gpu["architecture"] == "Hopper"
    assert gpu["board_part_number"] == "692-2G520-0200-000"
    assert re.fullmatch(r"\d{13}", gpu["serial"])
    assert gpu["persistence_mode"] is True
    assert gpu["ecc_mode_current"] is True
    assert gpu["ecc_errors_corrected"] == 0 and gpu["ecc_errors_uncorrected"] == 0
    assert gpu["retired_pages"] is None  # Hopper remaps rows instead
    assert gpu["remapped_rows_pending"] is False
    assert gpu["mig_mode_current"] is False and "mig_devices" not in gpu
    # NVML has no NUMA node for an x86 GPU: the PCI function's node and CPUs answer
    assert [g["numa_node"] for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[0]["cpu_affinity"] == "0-55,112-167"
    assert gpus[7]["cpu_affinity"] == "56-111,168-223"
    assert len(gpu["nvlinks"]) == 18 and all(link["active"] for link in gpu["nvlinks"])
    assert report["warnings"] == []


def test_h100_nvswitch_makes_every_pair_nv18(profile_report):
    report = profile_report("h100")
    assert set(gpu_pair_classes(report).values()) == {"NV18"}
    assert report["nvswitch_count"] == 4


def test_h100_nic_affinity(profile_report):
    report = profile_report("h100")
    nics = {nic["name"]: nic for nic in report["nics"]}
    assert sorted(nics) == ["eno1", *(f"mlx5_{i}" for i in range(8))]
    mlx = nics["mlx5_0"]
    assert mlx["kind"] == "infiniband" and mlx["speed_mbps"] == 400000 and mlx["state"] == "up"
    assert mlx["netdev"] == "ibp24s0" and mlx["pci_bus_id"] == "0000:18:00.0"
    assert mlx["numa_node"] == 0 and mlx["addresses"]
    assert nics["eno1"]["kind"] == "ethernet" and nics["eno1"]["speed_mbps"] == 10000
    gpu_nic = links_between(report, "gpu", "nic")
    for i in range(8):
        for j in range(8):
            expected = "PIX" if i == j else ("NODE" if (i < 4) == (j < 4) else "SYS")
            assert gpu_nic[(f"gpu:{i}", f"nic:mlx5_{j}")] == expected, (i, j)
    assert links_between(report, "nic", "nic")[("nic:mlx5_0", "nic:mlx5_1")] == "NODE"


def test_h100_host_facts(profile_report):
    host = profile_report("h100")["host"]
    assert host["vendor"] == "NVIDIA" and host["product"] == "DGXH100"
    assert (host["cpu_sockets"], host["cpu_cores"], host["cpu_threads"]) == (2, 112, 224)
    assert host["numa_nodes"] == 2
    assert host["memory_total_bytes"] == 2 * 1024**4
    assert host["fqdn"] == f"{host['hostname']}.cluster.example.com"
    assert host["virtualization"] == {"is_virtual": False, "hypervisor": None}
    assert host["system_uuid"] == host["system_uuid"].lower()
    assert "10.40.0.21/16" in host["addresses"]


def test_a100_mig_layouts(profile_report):
    report = profile_report("a100-mig")
    gpus = report["gpus"]
    layouts = [sorted(m["profile"] for m in g.get("mig_devices", [])) for g in gpus]
    assert layouts[0] == ["1g.10gb"] * 7
    assert layouts[1] == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert layouts[2] == ["3g.40gb", "4g.40gb"]
    assert layouts[3] == ["1c.3g.40gb"] * 3 + ["4g.40gb"]
    assert all("mig_devices" not in g for g in gpus[4:]), "MIG devices only where MIG is on"
    all_migs = [m for g in gpus for m in g.get("mig_devices", [])]
    assert len({m["uuid"] for m in all_migs}) == len(all_migs) == 17
    assert all(m["uuid"].startswith("MIG-") for m in all_migs)
    split = [m for m in gpus[3]["mig_devices"] if m["gpu_instance_id"] == 2]
    assert [m["compute_instance_id"] for m in split] == [0, 1, 2]
    assert {(m["placement_start"], m["placement_size"]) for m in split} == {(4, 4)}
    seven = gpus[0]["mig_devices"]
    assert [m["placement_start"] for m in seven] == list(range(7))
    assert {m["sm_count"] for m in seven} == {14}
    assert {m["memory_bytes"] for m in seven} == {9728 * 1024 * 1024}
    assert (gpus[4]["mig_mode_current"], gpus[4]["mig_mode_pending"]) == (False, True)
    assert any("MIG mode turns on" in w and gpus[4]["uuid"] in w for w in report["warnings"])
    assert (gpus[5]["mig_mode_current"], gpus[5]["mig_mode_pending"]) == (False, False)


def test_a100_links(profile_report):
    report = profile_report("a100-mig")
    assert set(gpu_pair_classes(report).values()) == {"NV12"}
    assert report["nvswitch_count"] == 6
    gpu_nic = links_between(report, "gpu", "nic")
    assert gpu_nic[("gpu:0", "nic:mlx5_0")] == "PIX"  # same inner switch
    assert gpu_nic[("gpu:0", "nic:mlx5_1")] == "PXB"  # through the upper switch
    assert gpu_nic[("gpu:0", "nic:mlx5_2")] == "SYS"  # another NUMA node
    assert report["host"]["numa_nodes"] == 8


def test_l40s_pcie_classes_and_unsupported_fields(profile_report):
    report = profile_report("l40s")
    pairs = gpu_pair_classes(report)
    assert pairs[("gpu:0", "gpu:1")] == "PIX"
    assert pairs[("gpu:0", "gpu:2")] == "NODE"
    assert pairs[("gpu:1", "gpu:2")] == "NODE"
    assert {pairs[(f"gpu:{i}", "gpu:3")] for i in range(3)} == {"SYS"}
    assert report["nvswitch_count"] == 0
    gpu_nic = links_between(report, "gpu", "nic")
    assert gpu_nic[("gpu:0", "nic:mlx5_0")] == "PIX"
    assert gpu_nic[("gpu:3", "nic:mlx5_1")] == "NODE"
    assert gpu_nic[("gpu:0", "nic:mlx5_1")] == "SYS"
    mlx = next(n for n in report["nics"] if n["name"] == "mlx5_0")
    assert mlx["kind"] == "ethernet" and mlx["netdev"] == "ens1f0np0"  # RoCE
    for gpu in report["gpus"]:
        # NotSupported in NVML becomes null, never a placeholder
        assert gpu["mig_mode_current"] is None and gpu["mig_mode_pending"] is None
        assert gpu["remapped_rows_correctable"] is None
        assert gpu["nvlinks"] == []
        assert gpu["retired_pages"] == 0 and gpu["retired_pages_pending"] is False
        assert gpu["status"] == "ok"
    persistence = [w for w in report["warnings"] if "persistence mode is off" in w]
    assert len(persistence) == 4


def test_cpu_only_server_still_reports_its_host(profile_report):
    report = profile_report("cpu-only")
    assert report["gpus"] == [] and report["driver"] is None
    assert "NVML Shared Library Not Found" in report["nvml_error"]
    assert report["host"]["cpu_sockets"] == 2 and report["host"]["memory_total_bytes"]
    assert [n["name"] for n in report["nics"]] == ["eno1np0", "eno2np1"]
    assert report["pci_gpus"] == [] and report["nvswitch_count"] is None
    assert links_between(report, "nic", "nic") == {("nic:eno1np0", "nic:eno2np1"): "PIX"}


def test_gpu_fallen_off_the_bus_is_reported(profile_report):
    report = profile_report("h100-lost")
    assert len(report["gpus"]) == 7
    missing = [p for p in report["pci_gpus"] if not p["in_nvml"]]
    assert missing == [
        {"pci_bus_id": "0000:bb:00.0", "device_id": "0x2330", "driver": "nvidia", "in_nvml": False}
    ]
    assert len(report["pci_gpus"]) == 8
    assert any("0000:bb:00.0" in w and "fallen off the bus" in w for w in report["warnings"])
    assert set(gpu_pair_classes(report).values()) == {"NV18"}


def test_gpu_failing_mid_walk_keeps_the_report(profile_report, validate):
    report = profile_report("h100-gpu-error")
    validate(report)
    bad = report["gpus"][3]
    assert bad["status"] == "error"
    assert "GPU is lost" in bad["error"] and "power_limit_w" in bad["error"]
    # what it answered before failing is kept; the rest is unknown
    assert UUID_RE.match(bad["uuid"]) and bad["name"] and bad["pci_bus_id"] == "0000:5d:00.0"
    assert bad["memory_total_bytes"] is not None
    assert bad["power_limit_w"] is None and bad["persistence_mode"] is None
    assert [g["status"] for g in report["gpus"]].count("ok") == 7
    assert any(w.startswith("GPU 3 ") and "GPU is lost" in w for w in report["warnings"])
    pairs = gpu_pair_classes(report)
    # GPU 6 lost one NVLink: its pairs drop to NV17, and the dead link is named
    assert pairs[("gpu:0", "gpu:6")] == "NV17" and pairs[("gpu:0", "gpu:1")] == "NV18"
    assert any("NVLink 17 inactive (17 of 18 active)" in w for w in report["warnings"])
    link17 = report["gpus"][6]["nvlinks"][17]
    assert link17 == {"link": 17, "active": False, "remote_pci_bus_id": None}
    # the failed GPU's pairs fall back to the PCIe path
    assert pairs[("gpu:0", "gpu:3")] == "NODE" and pairs[("gpu:3", "gpu:4")] == "SYS"


def test_gpu_without_uuid_gets_a_stable_synthetic_one(collect_machine):
    machine = build("l40s", seed=3)
    machine.gpus[1].fail_from = "uuid"
    first = collect_machine(machine)["gpus"][1]
    second = collect_machine(machine)["gpus"][1]
    assert first["status"] == "error" and first["uuid_synthetic"] is True
    assert first["uuid"].startswith("GPU-")
    assert first["uuid"] == second["uuid"]


def test_kvm_host_lists_guests_and_passed_through_gpus(profile_report):
    report = profile_report("kvm-host")
    assert report["gpus"] == [] and "Driver Not Loaded" in report["nvml_error"]
    assert [p["driver"] for p in report["pci_gpus"]] == ["vfio-pci"] * 4
    assert {p["in_nvml"] for p in report["pci_gpus"]} == {None}  # NVML unread: unknown
    assert not any("PCI bus" in w for w in report["warnings"]), "passthrough is not a lost GPU"
    guests = report["host"]["guests"]
    assert sorted(g["name"] for g in guests) == ["gpu-vm-01", "gpu-vm-02"]
    assert {g["state"] for g in guests} == {"running"}
    assert len(guests) == 2 and all(len(g["uuid"]) == 36 for g in guests)


def test_kvm_guest_is_virtual_and_its_gpus_share_a_host_bridge(profile_report):
    report = profile_report("kvm-vm")
    assert report["host"]["virtualization"] == {"is_virtual": True, "hypervisor": "kvm"}
    assert report["host"]["vendor"] == "QEMU"
    assert gpu_pair_classes(report) == {("gpu:0", "gpu:1"): "PHB"}
    assert report["nics"][0]["pci_bus_id"] == "0000:01:00.0"  # found through virtio0


def test_nvlink_pairs_need_no_pcie_topology_calls(collect_machine):
    h100 = build("h100", seed=1)
    backend = FakeNvmlBackend(h100)
    collect_machine(h100, backend)
    assert backend.calls["common_ancestor"] == 0
    l40s = build("l40s", seed=1)
    backend = FakeNvmlBackend(l40s)
    collect_machine(l40s, backend)
    assert backend.calls["common_ancestor"] == 6  # one per GPU pair


def test_a_huge_server_is_trimmed_to_the_schema_not_refused(validate):
    nics = [{"name": f"eth{i:03d}"} for i in range(300)]
    links = [
        {"a": f"nic:{a['name']}", "b": f"nic:{b['name']}", "link_class": "SYS"}
        for i, a in enumerate(nics)
        for b in nics[i + 1 :]
    ]
    report = profile_report_stub()
    report.update(nics=nics, links=[{"a": "gpu:0", "b": "nic:eth000", "link_class": "PIX"}, *links])
    finish(report)
    validate(report)
    assert len(report["nics"]) == 256 and len(report["links"]) == 1
    assert any("300 NICs" in w for w in report["warnings"])


def profile_report_stub():
    return {
        "schema": "cluster-atlas/report/v1",
        "agent": {"version": "0.1.0", "source": "simulator"},
        "collected_at": "2026-01-01T00:00:00Z",
        "host": {"hostname": "big"},
        "gpus": [{"index": 0, "uuid": "GPU-1"}],
        "warnings": [],
    }
