"""`python -m agent collect`: live NVML (absent here), saved files, bad input; no simulator."""

from __future__ import annotations

import json

from simulator.fake_nvml import materialize
from simulator.profiles import build

from .test_transport import agent, simulator_cli


def test_collect_without_nvml_prints_the_host_report_and_fails(validate):
    """This machine has no NVIDIA driver: the real pynvml raises NVMLError_LibraryNotFound."""
    done = agent("collect")
    assert done.returncode == 3
    report = json.loads(done.stdout)
    validate(report)
    assert report["gpus"] == [] and report["agent"]["source"] == "nvml"
    assert "NVML Shared Library Not Found" in report["nvml_error"]
    assert report["host"]["hostname"]
    assert done.stderr.count("\n") == 1 and "NVML unavailable" in done.stderr


def test_collect_reads_host_facts_below_root(tmp_path, validate):
    machine = build("h100", seed=2, hostname="dgx-under-root")
    materialize(machine, tmp_path)
    done = agent("collect", "--root", str(tmp_path), "--compact")
    report = json.loads(done.stdout)
    validate(report)
    assert report["host"]["hostname"] == "dgx-under-root"
    assert report["host"]["system_uuid"] == machine.system_uuid
    assert len(report["nics"]) == 9 and len(report["pci_gpus"]) == 8
    assert {p["in_nvml"] for p in report["pci_gpus"]} == {None}
    assert any("bound to the nvidia driver but NVML failed" in w for w in report["warnings"])


def test_collect_from_saved_files(samples, validate):
    done = agent(
        "collect",
        "--nvidia-smi-xml",
        str(samples / "nvsmi-q-h100x8-gpud.txt"),
        "--topology",
        str(samples / "topo-8xh20-nv18-ibp-nics.txt"),
        "--hostname",
        "dgx-042",
        "--system-uuid",
        "4C4C4544-0042-3510-8051-B3C04F4A4B32",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    validate(report)
    assert report["agent"]["source"] == "nvidia-smi"
    assert report["host"] == {
        "hostname": "dgx-042",
        "system_uuid": "4c4c4544-0042-3510-8051-b3c04f4a4b32",
    }
    assert len(report["gpus"]) == 8 and report["links"]


def test_the_agent_has_no_simulated_servers():
    """What runs on a GPU server reports that server: profiles are the simulator's."""
    one_line_failure(agent("collect", "--profile", "l40s"), 2, "unrecognized arguments")
    one_line_failure(agent("collect", "--seed", "1"), 2, "unrecognized arguments")
    one_line_failure(agent("simulate", "--url", "x", "--token-file", "y"), 2, "invalid choice")


def test_collect_from_a_simulated_profile(validate):
    done = simulator_cli("collect", "--profile", "a100-mig", "--hostname", "dgx-a100-09")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    validate(report)
    assert report["host"]["hostname"] == "dgx-a100-09"
    assert report["agent"]["source"] == "simulator"


def one_line_failure(done, status: int, text: str) -> None:
    assert done.returncode == status
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], done.stderr


def test_bad_input_fails_in_one_line(tmp_path, samples):
    one_line_failure(agent("collect", "--bogus"), 2, "unrecognized arguments")
    one_line_failure(
        agent(
            "collect",
            "--topology",
            str(samples / "topo-1xl40s-ansi-escapes-utku.txt"),
            "--system-uuid",
            "x",
        ),
        2,
        "--system-uuid needs --hostname",
    )
    one_line_failure(
        agent("collect", "--nvidia-smi-xml", str(tmp_path / "missing.xml")), 2, "cannot read"
    )
    garbage = tmp_path / "garbage.xml"
    garbage.write_text("<html></html>")
    one_line_failure(agent("collect", "--nvidia-smi-xml", str(garbage)), 2, str(garbage))
    one_line_failure(simulator_cli("collect", "--profile", "h200"), 2, "unknown profile")
    one_line_failure(
        agent("push", "--url", "atlas", "--token-file", str(tmp_path / "none")), 2, "token file"
    )
