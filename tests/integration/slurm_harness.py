"""A real Slurm on this machine: munge, slurmctld, four slurmd GPU nodes and slurmrestd.

Debian's slurm-wlm 22.05 runs several ``slurmd -N <name>`` on one host, so one machine
holds a whole small GPU cluster: four nodes with ``Gres=gpu:h100:8`` backed by empty
placeholder ``/dev`` files. Everything lives in one scratch folder (its own munge socket
and key, its own ports picked free, its own state), so two test runs on one machine do
not meet, and nothing is left behind: every daemon runs in the foreground as our child,
every wait is bounded and checks that the daemons are alive (slurmctld may exit 0 right
after starting), and stop() sends TERM, waits 5 s, then KILLs by pid.

Use it through the session fixture ``slurm_cluster`` (import it into a conftest or a test
module); it skips when the Debian packages are missing and fails instead under CI=true.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import require

PACKAGES = "munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin"
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmrestd")
CLIENTS = ("scontrol", "sinfo", "sbatch", "squeue", "scancel")
NODE_COUNT = 4
GPUS_PER_NODE = 8
GPU_TYPE = "h100"
CLUSTER_NAME = "atlasci"
RESTD_VERSION = "v0.0.38"  # the only openapi plugin Debian 12's 22.05 ships for slurmctld
RESTD_USER = "nobody"  # slurmrestd refuses to run as root or as SlurmUser
STOP_GRACE_S = 5.0


class SlurmHarnessError(RuntimeError):
    """The local Slurm did not come up (the message carries the daemons' last log lines)."""


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")


def missing_binaries() -> list[str]:
    """Slurm and munge programs this harness needs and cannot find."""
    return [name for name in (*DAEMONS, *CLIENTS) if _which(name) is None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


@dataclass
class SlurmCluster:
    """A running local Slurm and what a test needs to talk to it.

    ``env`` holds SLURM_CONF; pass it to every Slurm command (or use ``run``). The
    slurmrestd at ``restd_url`` takes ``token`` for ``user`` in the X-SLURM-USER-* headers.
    """

    root: Path
    env: dict[str, str]
    node_names: list[str]
    scontrol: str
    sinfo: str
    sbatch: str
    squeue: str
    scancel: str
    restd_url: str = ""
    token: str = ""
    user: str = "root"
    restd_version: str = RESTD_VERSION
    cluster_name: str = CLUSTER_NAME
    gpus_per_node: int = GPUS_PER_NODE
    gpu_type: str = GPU_TYPE
    _processes: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    # -- commands ---------------------------------------------------------------------

    def run(self, *args: str, timeout: float = 20.0, check: bool = True) -> str:
        """Run a Slurm client command against this cluster; its stdout."""
        result = subprocess.run(
            list(args),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise SlurmHarnessError(
                f"{' '.join(args)} exited {result.returncode}: {result.stderr.strip()[:500]}"
            )
        return result.stdout

    def submit_gpu_job(self, gpus: int, seconds: int = 60) -> str:
        """Submit a batch job that holds ``gpus`` GPUs for ``seconds``; its job id."""
        out = self.run(
            self.sbatch,
            "--parsable",
            f"--gres=gpu:{self.gpu_type}:{gpus}",
            "--time=3",
            "--output=/dev/null",
            f"--chdir={self.root}",
            "--job-name=atlas-gpu-hold",
            "--wrap",
            f"sleep {seconds}",
        )
        return out.strip().split(";")[0]

    def job_state(self, job_id: str) -> str:
        return self.run(self.squeue, "-h", "-j", job_id, "-o", "%T", check=False).strip()

    def wait_job_running(self, job_id: str, timeout: float = 30.0) -> None:
        self._wait(lambda: self.job_state(job_id) == "RUNNING", timeout, f"job {job_id} running")

    def cancel_all_jobs(self, timeout: float = 20.0) -> None:
        """Cancel every job and wait (bounded) until the queue is empty."""
        self.run(self.scancel, "--user=root", check=False)
        with contextlib.suppress(SlurmHarnessError):
            self._wait(
                lambda: not self.run(self.squeue, "-h", "-o", "%i", check=False).strip(),
                timeout,
                "an empty job queue",
            )

    # -- lifecycle --------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], user: str | None = None, **env: str) -> None:
        log = self.root / "log" / f"{name}.out"
        process_env = {**self.env, **env}
        kwargs: dict[str, object] = {}
        if user is not None:
            entry = pwd.getpwnam(user)
            kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        with log.open("ab") as out:
            process = subprocess.Popen(
                args,
                env=process_env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **kwargs,  # type: ignore[arg-type]
            )
        self._processes.append((name, process, log))

    def _dead(self) -> list[str]:
        return [name for name, process, _log in self._processes if process.poll() is not None]

    def _logs(self) -> str:
        parts = []
        for name, process, log in self._processes:
            parts.append(f"--- {name} (exit {process.poll()}) {log}\n{_tail(log)}")
        for log in sorted((self.root / "log").glob("*.log")):
            parts.append(f"--- {log.name}\n{_tail(log)}")
        return "\n".join(parts)

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``ready()`` until true; fail fast when a daemon died, or at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            dead = self._dead()
            if dead:
                raise SlurmHarnessError(
                    f"waiting for {what}: {', '.join(dead)} exited\n{self._logs()}"
                )
            try:
                if ready():
                    return
            except (subprocess.TimeoutExpired, SlurmHarnessError, OSError):
                pass
            if time.monotonic() > deadline:
                raise SlurmHarnessError(f"no {what} after {timeout:g} s\n{self._logs()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Cancel jobs, then stop daemons in stages: TERM, wait 5 s, KILL (by pid).

        Node daemons and slurmrestd go first, while slurmctld still answers (slurmd
        ignores TERM while it cannot reach the controller), then slurmctld, then munged.
        """
        if any(name == "slurmctld" and p.poll() is None for name, p, _ in self._processes):
            with contextlib.suppress(Exception):
                self.cancel_all_jobs(timeout=10)
        stages = (
            [p for n, p, _ in self._processes if n not in ("slurmctld", "munged")],
            [p for n, p, _ in self._processes if n == "slurmctld"],
            [p for n, p, _ in self._processes if n == "munged"],
        )
        for stage in stages:
            _terminate(stage)
        self._processes.clear()


def _terminate(processes: list[subprocess.Popen[bytes]]) -> None:
    """TERM each running process, wait up to STOP_GRACE_S for all, KILL the rest."""
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)


def _write_config(root: Path, ports: dict[str, int], names: list[str]) -> None:
    (root / "etc" / "slurm.conf").write_text(
        "\n".join(
            [
                f"ClusterName={CLUSTER_NAME}",
                "SlurmctldHost=localhost",
                f"SlurmctldPort={ports['slurmctld']}",
                f"SlurmdPort={ports['slurmd']}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                f"AuthInfo=socket={root}/munge/munge.sock",
                "CredType=cred/munge",
                "AuthAltTypes=auth/jwt",
                f"AuthAltParameters=jwt_key={root}/etc/jwt_hs256.key",
                f"StateSaveLocation={root}/state",
                f"SlurmdSpoolDir={root}/spool/%n",
                f"SlurmctldPidFile={root}/run/slurmctld.pid",
                f"SlurmdPidFile={root}/run/slurmd-%n.pid",
                f"SlurmctldLogFile={root}/log/slurmctld.log",
                f"SlurmdLogFile={root}/log/slurmd-%n.log",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "JobCompType=jobcomp/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "SchedulerType=sched/backfill",
                "MpiDefault=none",
                "ReturnToService=2",
                "SlurmdTimeout=300",
                "GresTypes=gpu",
                *(
                    f"NodeName={name} NodeHostname=localhost Port={ports[name]} CPUs=2 "
                    f"RealMemory=1000 Gres=gpu:{GPU_TYPE}:{GPUS_PER_NODE} State=UNKNOWN"
                    for name in names
                ),
                f"PartitionName=gpu Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    # GPU GRES need File= entries or the nodes go INVAL; empty files are accepted.
    (root / "etc" / "gres.conf").write_text(
        "AutoDetect=off\n"
        f"NodeName={','.join(names)} Name=gpu Type={GPU_TYPE} "
        f"File={root}/dev/nvidia[0-{GPUS_PER_NODE - 1}]\n"
    )
    for i in range(GPUS_PER_NODE):
        (root / "dev" / f"nvidia{i}").touch()
    key = root / "etc" / "jwt_hs256.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)


def _start_munge(cluster: SlurmCluster) -> None:
    munge_dir = cluster.root / "munge"
    munge_dir.mkdir(mode=0o755)
    key = munge_dir / "munge.key"
    mungekey = _which("mungekey")
    if mungekey:
        subprocess.run(
            [mungekey, "--create", f"--keyfile={key}"], check=True, timeout=20, capture_output=True
        )
    else:
        shutil.copyfile("/etc/munge/munge.key", key)
    entry = pwd.getpwnam("munge")
    for path in (munge_dir, key):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    key.chmod(0o600)
    munge_dir.chmod(0o755)  # clients need to reach the socket
    socket_path = munge_dir / "munge.sock"
    cluster._spawn(
        "munged",
        [
            _which("munged") or "munged",
            "--foreground",
            f"--socket={socket_path}",
            f"--key-file={key}",
            f"--pid-file={munge_dir}/munged.pid",
            f"--log-file={munge_dir}/munged.log",
            f"--seed-file={munge_dir}/munged.seed",
            "--num-threads=10",
        ],
        user="munge",
    )
    cluster._wait(socket_path.exists, 15, "the munge socket")


def _restd_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/openapi/v3", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # it answered, even if it refused
    except (urllib.error.URLError, OSError):
        return False


def start_cluster(with_restd: bool = True) -> SlurmCluster:
    """Start munge, slurmctld, four slurmd and (optionally) slurmrestd; a ready cluster.

    Raises SlurmHarnessError with the daemons' log tails when anything fails to come up;
    whatever was started is stopped first.
    """
    root = Path(tempfile.mkdtemp(prefix="atlas-slurm-"))
    root.chmod(0o755)  # slurmrestd runs as nobody and reads slurm.conf from here
    for sub in ("etc", "state", "spool", "run", "log", "dev"):
        (root / sub).mkdir()
    names = [f"gpu-node{i}" for i in range(1, NODE_COUNT + 1)]
    ports = {name: _free_port() for name in ("slurmctld", "slurmd", "slurmrestd", *names)}
    _write_config(root, ports, names)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SLURM_", "SBATCH_", "SRUN_", "SQUEUE_", "SINFO_"))
    }
    env["SLURM_CONF"] = str(root / "etc" / "slurm.conf")
    paths = {name: _which(name) or name for name in (*DAEMONS, *CLIENTS)}
    cluster = SlurmCluster(
        root=root,
        env=env,
        node_names=names,
        scontrol=paths["scontrol"],
        sinfo=paths["sinfo"],
        sbatch=paths["sbatch"],
        squeue=paths["squeue"],
        scancel=paths["scancel"],
    )
    try:
        _start_munge(cluster)
        cluster._spawn("slurmctld", [paths["slurmctld"], "-D", "-i"])
        cluster._wait(
            lambda: "UP" in cluster.run(cluster.scontrol, "ping", timeout=5, check=False),
            30,
            "slurmctld answering ping",
        )
        for name in names:
            cluster._spawn(f"slurmd-{name}", [paths["slurmd"], "-D", "-N", name])

        def all_idle() -> bool:
            out = cluster.run(cluster.sinfo, "-h", "-N", "-o", "%N %T", timeout=5, check=False)
            states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
            return sorted(states) == names and set(states.values()) == {"idle"}

        cluster._wait(all_idle, 45, f"{NODE_COUNT} idle nodes")
        if with_restd:
            out = cluster.run(
                cluster.scontrol, "token", f"username={cluster.user}", "lifespan=7200"
            )
            cluster.token = out.strip().split("=", 1)[1]
            cluster.restd_url = f"http://127.0.0.1:{ports['slurmrestd']}"
            cluster._spawn(
                "slurmrestd",
                [
                    paths["slurmrestd"],
                    "-s",
                    f"openapi/{RESTD_VERSION}",
                    "-a",
                    "rest_auth/jwt",
                    f"127.0.0.1:{ports['slurmrestd']}",
                ],
                user=RESTD_USER,
                SLURM_JWT="daemon",
            )
            cluster._wait(lambda: _restd_answers(cluster.restd_url), 20, "slurmrestd answering")
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running four-node GPU Slurm with slurmrestd, for the whole test session.

    Skips (fails under CI=true) when the Debian packages are missing or the tests do not
    run as root (slurmd and the munge/nobody users need it).
    """
    missing = missing_binaries()
    require(
        not missing,
        f"Slurm programs not found ({', '.join(missing)}): "
        f"apt-get install --no-install-recommends {PACKAGES}",
    )
    require(os.geteuid() == 0, "the Slurm tier runs slurmd, munged and slurmrestd: run as root")
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()
        if os.environ.get("ATLAS_KEEP_SLURM_ROOT"):
            print(f"slurm harness files kept in {cluster.root}")
        else:
            shutil.rmtree(cluster.root, ignore_errors=True)
