"""The container images' invariants, read from deploy/images/ without podman (the images
themselves are built and run by `make image` and `make image-test`)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "deploy" / "images"
SYSTEMD = ROOT / "deploy" / "systemd"
CONTAINERFILES = {
    "cluster-atlas": IMAGES / "cluster-atlas.Containerfile",
    "cluster-atlas-agent": IMAGES / "cluster-atlas-agent.Containerfile",
}
OCI_LABELS = ("version", "revision", "source", "created")


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, its arguments) with continuation lines joined and comments left out."""
    lines: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    out = []
    for line in lines:
        word, _, rest = line.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


@pytest.mark.parametrize("name", sorted(CONTAINERFILES))
def test_images_run_as_a_non_root_user(name: str) -> None:
    users = [args for word, args in instructions(CONTAINERFILES[name]) if word == "USER"]
    assert users, f"{name}: no USER: it would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"0", "root"}
    assert int(user) >= 10000  # outside any host's system and login ranges
    text = CONTAINERFILES[name].read_text()
    assert f"atlas:x:{user}:" in text  # the user exists in /etc/passwd


@pytest.mark.parametrize("name", sorted(CONTAINERFILES))
def test_images_carry_the_oci_labels(name: str) -> None:
    labels = " ".join(args for word, args in instructions(CONTAINERFILES[name]) if word == "LABEL")
    for label in OCI_LABELS:
        key = label.upper()
        assert f'org.opencontainers.image.{label}="${{{key}}}"' in labels, label
        assert any(
            word == "ARG" and args.split("=")[0] == key
            for word, args in instructions(CONTAINERFILES[name])
        ), f"{label} is not a build argument: build.sh could not fix it from the commit"
    assert f'org.opencontainers.image.title="{name}"' in labels


def _pip_installs(path: Path) -> list[list[str]]:
    runs = " ; ".join(args for word, args in instructions(path) if word == "RUN")
    found = []
    for command in re.split(r";|&&", runs):
        words = shlex.split(command)
        for i, word in enumerate(words):
            if word.endswith("pip") and words[i + 1 : i + 2] == ["install"]:
                found.append(words[i + 2 :])
    return found


@pytest.mark.parametrize("name", sorted(CONTAINERFILES))
def test_pip_installs_nothing_beyond_the_pins(name: str) -> None:
    """Only requirements.txt (pinned) or the agent's own wheel (its pins in pyproject.toml);
    never a bare or upgraded package."""
    installs = _pip_installs(CONTAINERFILES[name])
    assert installs
    for args in installs:
        assert "--upgrade" not in args and "-U" not in args
        targets = [a for a in args if not a.startswith("-")]
        if "-r" in args:
            assert args[args.index("-r") + 1] == "requirements.txt"
            targets.remove("requirements.txt")
        for target in targets:
            assert target.startswith("/tmp/wheels/cluster_atlas_agent-"), target
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[0-9][^ ]*", line.strip()), line
    constraints = (IMAGES / "build-constraints.txt").read_text().splitlines()
    assert [c for c in constraints if c and not c.startswith("#")] == ["setuptools==84.2.1"]


def test_agent_image_asks_for_nvml_and_runs_the_agent() -> None:
    parsed = instructions(CONTAINERFILES["cluster-atlas-agent"])
    env = " ".join(args for word, args in parsed if word == "ENV")
    assert "NVIDIA_VISIBLE_DEVICES=all" in env
    assert "NVIDIA_DRIVER_CAPABILITIES=utility" in env
    entrypoint = [args for word, args in parsed if word == "ENTRYPOINT"][-1]
    assert entrypoint.endswith('"-m", "agent"]')
    assert "requirements.txt" not in CONTAINERFILES["cluster-atlas-agent"].read_text()


def _exec_start(unit: str) -> list[str]:
    """A unit's ExecStart, its binary reduced to its name."""
    text = (SYSTEMD / unit).read_text().replace("\\\n", " ")
    line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
    words = shlex.split(line.removeprefix("ExecStart="))
    return [Path(words[0]).name, *words[1:]]


def _example_env() -> dict[str, str]:
    env = {}
    for line in (SYSTEMD / "atlas.env.example").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env[key] = value
    return env


def _entrypoint(tmp_path: Path, command: str, env: dict[str, str]) -> list[str]:
    """What deploy/images/entrypoint.sh executes for `command`: stubs on PATH print it."""
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    for name in ("gunicorn", "celery", "python"):
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\nprintf "%s\\n" {name} "$@"\n')
        stub.chmod(0o755)
    done = subprocess.run(
        ["/bin/sh", str(IMAGES / "entrypoint.sh"), *shlex.split(command)],
        env={**env, "PATH": f"{stubs}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return done.stdout.splitlines()


@pytest.mark.parametrize(
    ("command", "unit"),
    [
        ("web", "cluster-atlas-web.service"),
        ("worker", "cluster-atlas-worker.service"),
        ("beat", "cluster-atlas-beat.service"),
    ],
)
def test_entrypoint_runs_what_the_systemd_units_run(
    tmp_path: Path, command: str, unit: str
) -> None:
    env = _example_env()
    expected = [
        # systemd's %H is the host's name; Celery expands its own %h to the same.
        re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], word).replace("%H", "%h")
        for word in _exec_start(unit)
    ]
    assert _entrypoint(tmp_path, command, env) == expected


def test_entrypoint_runs_migrate_and_any_manage_py_command(tmp_path: Path) -> None:
    env = dict(os.environ)
    assert _entrypoint(tmp_path, "migrate", env) == ["python", "manage.py", "migrate", "--no-input"]
    assert _entrypoint(tmp_path, "createagenttoken gpu-node-7", env) == [
        "python",
        "manage.py",
        "createagenttoken",
        "gpu-node-7",
    ]
    # With no setting at all the web command still binds inside the container.
    bare = _entrypoint(tmp_path, "web", {})
    assert bare[bare.index("--bind") + 1] == "0.0.0.0:8000"


def test_build_fixes_every_time_from_the_commit() -> None:
    build = (IMAGES / "build.sh").read_text()
    assert 'SOURCE_DATE_EPOCH="$(git log -1 --format=%ct HEAD)"' in build
    assert '--timestamp "$SOURCE_DATE_EPOCH"' in build
    assert "git archive --format=tar HEAD" in build  # the commit, not the working tree
    for containerfile in CONTAINERFILES.values():
        text = containerfile.read_text()
        assert "ARG SOURCE_DATE_EPOCH" in text
        assert text.count("--invalidation-mode checked-hash") >= 1
        assert "PYTHONHASHSEED=0" in text
