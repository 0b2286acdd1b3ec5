"""The scheduler nodes a server declares: flags, the DaemonSet's environment, `slurmd -C`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from agent.sources.scheduler_node import (
    parse_slurmd_node_name,
    scheduler_nodes,
    slurmd_node_name,
)

from .test_transport import agent

SLURMD_C = (
    "NodeName=gpu-node1 CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 "
    "ThreadsPerCore=2 RealMemory=2063937\nUpTime=12-03:04:05\n"
)


def fake_slurmd(directory: Path, body: str) -> Path:
    """A `slurmd` on a PATH of its own: a shell script doing `body`."""
    directory.mkdir(exist_ok=True)
    script = directory / "slurmd"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return directory


def printing(tmp_path: Path) -> Path:
    (tmp_path / "sample").write_text(SLURMD_C)
    return fake_slurmd(tmp_path / "bin", f'cat "{tmp_path / "sample"}"')


def test_slurmd_c_gives_its_first_node_name():
    assert parse_slurmd_node_name(SLURMD_C) == "gpu-node1"
    assert parse_slurmd_node_name("UpTime=1-00:00:00\n") is None


def test_a_slurmd_on_path_names_the_node(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{printing(tmp_path)}:{os.environ['PATH']}")
    assert slurmd_node_name() == ("gpu-node1", None)


def test_no_slurmd_says_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert slurmd_node_name() == (None, None)


@pytest.mark.parametrize(
    ("body", "warned"),
    [("echo 'error: no config' >&2; exit 1", "exited 1"), ("exec sleep 5", "no answer")],
)
def test_a_failing_slurmd_leaves_the_name_out_with_a_warning(tmp_path, monkeypatch, body, warned):
    monkeypatch.setenv("PATH", f"{fake_slurmd(tmp_path / 'bin', body)}:{os.environ['PATH']}")
    found = scheduler_nodes(ask_slurmd=lambda: slurmd_node_name(timeout=0.5))
    assert "slurm_node_name" not in found.names
    assert len(found.warnings) == 1 and warned in found.warnings[0]


def test_flags_come_before_the_environment_and_slurmd():
    found = scheduler_nodes(
        kubernetes="k8s-flag",
        slurm="slurm-flag",
        env={"NODE_NAME": "k8s-env"},
        ask_slurmd=lambda: pytest.fail("slurmd asked despite --slurm-node-name"),
    )
    assert found.names == {"kubernetes_node_name": "k8s-flag", "slurm_node_name": "slurm-flag"}


def test_the_downward_api_environment_names_the_kubernetes_node():
    assert scheduler_nodes(env={"NODE_NAME": "ip-10-0-0-7.ec2.internal"}).names == {
        "kubernetes_node_name": "ip-10-0-0-7.ec2.internal"
    }
    assert scheduler_nodes(env={"KUBERNETES_NODE_NAME": "gpu-a"}).names == {
        "kubernetes_node_name": "gpu-a"
    }


def test_a_name_the_schema_refuses_is_left_out_with_a_warning():
    found = scheduler_nodes(env={"NODE_NAME": "Not A Node"}, ask_slurmd=lambda: ("a b", None))
    assert found.names == {}
    assert len(found.warnings) == 2


def test_collect_declares_the_nodes_from_the_environment_and_slurmd(tmp_path, samples, validate):
    env = {**os.environ, "PATH": f"{printing(tmp_path)}:{os.environ['PATH']}"}
    env["NODE_NAME"] = "gpu-node1.k8s"
    xml = str(samples / "nvsmi-q-h100x8-gpud.txt")
    done = agent("collect", "--nvidia-smi-xml", xml, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    validate(report)
    assert report["host"]["kubernetes_node_name"] == "gpu-node1.k8s"
    assert report["host"]["slurm_node_name"] == "gpu-node1"


def test_collect_takes_the_flags_and_asks_nothing_for_another_servers_files(
    tmp_path, samples, validate
):
    env = {**os.environ, "PATH": f"{printing(tmp_path)}:{os.environ['PATH']}"}
    env["NODE_NAME"] = "this-machine"
    xml = str(samples / "nvsmi-q-h100x8-gpud.txt")
    other = ("collect", "--nvidia-smi-xml", xml, "--hostname", "dgx-042")
    done = agent(*other, env=env)
    assert done.returncode == 0, done.stderr
    host = json.loads(done.stdout)["host"]
    assert "kubernetes_node_name" not in host and "slurm_node_name" not in host
    flagged = agent(
        *other, "--kubernetes-node-name", "dgx-042", "--slurm-node-name", "dgx042", env=env
    )
    report = json.loads(flagged.stdout)
    validate(report)
    assert report["host"]["kubernetes_node_name"] == "dgx-042"
    assert report["host"]["slurm_node_name"] == "dgx042"


def test_a_bad_node_name_flag_is_refused_in_one_line():
    done = agent("collect", "--kubernetes-node-name", "Bad_Name")
    assert done.returncode == 2
    assert "not a Kubernetes node name" in done.stderr
