"""The agent as shipped: `pip install ./agent`, the systemd unit, the documented example;
nothing of the simulator (fake NVML, profiles, fleets) in it."""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile

from agent.__main__ import EXIT_REFUSED, EXIT_USAGE, build_parser

from .conftest import REPO, samples_dir

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
    # one enrollment secret for the fleet; the agent token it gets kept in a state directory
    assert args.token_file is None
    assert args.enroll_token_file == "/etc/cluster-atlas/enroll-token"
    assert args.state_dir == "/var/lib/cluster-atlas"
    assert "cluster-atlas" in settings["StateDirectory"].split()  # writable under strict
    assert settings["KillSignal"] == "SIGTERM"
    assert set(settings["RestartPreventExitStatus"].split()) == {str(EXIT_USAGE), str(EXIT_REFUSED)}


def test_agent_project_ships_every_subpackage_and_the_schema():
    project = tomllib.loads((AGENT / "pyproject.toml").read_text())
    dependencies = project["project"]["dependencies"]
    assert [d.split("==")[0] for d in dependencies] == ["nvidia-ml-py", "grpcio", "protobuf"]
    requirements = (REPO / "requirements.txt").read_text()
    for dependency in dependencies:  # pinned exactly, and to the backend's own pins
        name, _, version = dependency.partition("==")
        pinned = re.search(rf"^{re.escape(name)}==(\S+)", requirements, re.M)
        assert version and pinned and pinned.group(1) == version, dependency
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


def imported_modules(path) -> set[str]:
    """Every module a file imports, absolute or relative (as `.name`), at any depth."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            names.update(f"{base}.{alias.name}".replace("..", ".") for alias in node.names)
    return names


def test_the_agent_never_imports_the_simulator():
    """The simulator imports the agent, never the reverse: what runs on GPU servers has no
    fake NVML, no server profiles and no fleets, not even behind a lazy import."""
    for path in AGENT.rglob("*.py"):
        for name in imported_modules(path):
            top = name.lstrip(".").split(".")[0]
            assert top != "simulator", f"{path} imports {name}"
            assert not re.search(r"(^|\.)(fake\w*|profiles|simulator)$", name), (
                f"{path} imports {name}"
            )


def pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--quiet", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_pip_install_of_the_agent_alone(tmp_path):
    """`pip wheel ./agent` builds the agent alone: schema included, no simulator, fake or
    profile module; installed, it works (no dependencies, so no download beyond the build
    backend)."""
    source = tmp_path / "src" / "agent"
    shutil.copytree(
        AGENT, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    )
    wheels = tmp_path / "wheels"
    pip("wheel", "--no-deps", "--wheel-dir", str(wheels), str(source))
    (wheel,) = wheels.glob("cluster_atlas_agent-*.whl")
    shipped = zipfile.ZipFile(wheel).namelist()
    modules = [n for n in shipped if n.endswith(".py")]
    assert "agent/__main__.py" in modules and "agent/report.schema.json" in shipped
    assert all(n.startswith("agent/") for n in modules), modules
    unwanted = [n for n in shipped if re.search(r"fake|profiles|simulat", n.rsplit("/", 1)[-1])]
    assert unwanted == []

    target = tmp_path / "site"
    pip("install", "--no-deps", "--no-index", "--target", str(target), str(wheel))
    installed = target / "agent"
    assert (installed / "report.schema.json").is_file()
    assert (installed / "sources" / "nvidia_smi_xml.py").is_file()
    sample = samples_dir() / "nvsmi-q-h100x8-gpud.txt"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent",
            "collect",
            "--nvidia-smi-xml",
            str(sample),
            "--hostname",
            "dgx-wheel",
            "--compact",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["schema"] == "cluster-atlas/report/v1" and len(report["gpus"]) == 8


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
