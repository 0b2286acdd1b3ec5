"""The agent as shipped: `pip install ./agent`, the systemd unit, the documented example."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib

from agent.__main__ import EXIT_REFUSED, EXIT_USAGE, build_parser

from .conftest import REPO

AGENT = REPO / "agent"
UNIT = AGENT / "packaging" / "cluster-atlas-agent.service"


def unit_settings() -> dict[str, str]:
    text = UNIT.read_text().replace("\\\n", " ")
    settings: dict[str, str] = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    return settings


def test_unit_starts_the_agent_with_options_it_knows():
    settings = unit_settings()
    argv = shlex.split(settings["ExecStart"])
    assert argv[0].endswith("/bin/cluster-atlas-agent") and argv[1] == "push"
    values = {"${ATLAS_URL}": "https://atlas.example.com", "$ATLAS_AGENT_ARGS": "--insecure"}
    args = build_parser().parse_args([values.get(a, a) for a in argv[1:]])
    assert args.interval == 300 and args.spool.startswith(settings["ReadWritePaths"])
    assert args.token_file == "/etc/cluster-atlas/token"
    assert settings["KillSignal"] == "SIGTERM"
    assert set(settings["RestartPreventExitStatus"].split()) == {str(EXIT_USAGE), str(EXIT_REFUSED)}


def test_agent_project_ships_every_subpackage_and_the_schema():
    project = tomllib.loads((AGENT / "pyproject.toml").read_text())
    assert project["project"]["dependencies"] == ["nvidia-ml-py==13.615.71"]
    pinned = re.search(r"^nvidia-ml-py==(\S+)", (REPO / "requirements.txt").read_text(), re.M)
    assert pinned and f"nvidia-ml-py=={pinned.group(1)}" in project["project"]["dependencies"]
    listed = set(project["tool"]["setuptools"]["packages"])
    on_disk = {
        "agent" + ("." + ".".join(p.parent.relative_to(AGENT).parts) if p.parent != AGENT else "")
        for p in AGENT.rglob("__init__.py")
        if "build" not in p.parts
    }
    assert listed == on_disk
    assert "report.schema.json" in project["tool"]["setuptools"]["package-data"]["agent"]


def test_the_agent_never_imports_django_or_the_backend():
    for path in AGENT.rglob("*.py"):
        text = path.read_text()
        for forbidden in ("django", "rest_framework", "inventory", "clusters", "topology"):
            assert not re.search(rf"^\s*(from|import)\s+{forbidden}\b", text, re.M), path
        if path.name != "nvml.py":
            assert not re.search(r"^\s*(from|import)\s+pynvml\b", text, re.M), path


def test_pip_install_of_the_agent_alone(tmp_path):
    """`pip install ./agent` installs a working agent, schema included (no dependencies, so
    no download beyond the build backend)."""
    source = tmp_path / "src" / "agent"
    shutil.copytree(
        AGENT, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    )
    target = tmp_path / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    installed = target / "agent"
    assert (installed / "report.schema.json").is_file()
    assert (installed / "sources" / "nvidia_smi_xml.py").is_file()
    run = subprocess.run(
        [sys.executable, "-m", "agent", "collect", "--profile", "l40s", "--compact"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["schema"] == "cluster-atlas/report/v1"


def test_documented_example_is_a_valid_8_gpu_nvlink_mig_report(validate):
    report = json.loads((REPO / "docs" / "report-example.json").read_text())
    validate(report)
    assert len(report["gpus"]) == 8
    assert any(g.get("mig_devices") for g in report["gpus"])
    gpu_pairs = [
        lk for lk in report["links"] if lk["a"].startswith("gpu") and lk["b"].startswith("gpu")
    ]
    assert len(gpu_pairs) == 28 and all(lk["link_class"].startswith("NV") for lk in gpu_pairs)
    assert report["nvswitch_count"]
