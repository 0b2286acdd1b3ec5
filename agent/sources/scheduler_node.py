"""Which scheduler node this server is: the name it declares in `host.kubernetes_node_name`
and `host.slurm_node_name`, which the backend binds that node by before any other method.

Kubernetes: the flag, else `NODE_NAME` or `KUBERNETES_NODE_NAME`, which a DaemonSet sets from
the Downward API's `spec.nodeName` (a pod cannot learn its node otherwise without the API).
Slurm: the flag, else the first `NodeName=` that the local `slurmd -C` prints. A missing
`slurmd` says nothing; a failing or slow one, or a name the schema would refuse, leaves the
field out with a warning: a report is never lost to a scheduler question.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

KUBERNETES_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
"""A DNS subdomain (RFC 1123), as Kubernetes names nodes; at most `KUBERNETES_NAME_MOST`."""
KUBERNETES_NAME_MOST = 253
SLURM_NAME = re.compile(r"^[^\s,=]+$")
"""A Slurm node name: no spaces, no list separator, no `=`; at most `SLURM_NAME_MOST`."""
SLURM_NAME_MOST = 64
KUBERNETES_ENV = ("NODE_NAME", "KUBERNETES_NODE_NAME")
"""The environment variables a DaemonSet sets from `spec.nodeName`, in the order read."""
SLURMD_TIMEOUT_S = 5.0


@dataclass
class SchedulerNodes:
    """What this server declares, and why a name it might have declared is left out."""

    names: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def valid_kubernetes_name(name: str) -> bool:
    return len(name) <= KUBERNETES_NAME_MOST and bool(KUBERNETES_NAME.match(name))


def valid_slurm_name(name: str) -> bool:
    return len(name) <= SLURM_NAME_MOST and bool(SLURM_NAME.match(name))


def parse_slurmd_node_name(text: str) -> str | None:
    """The first `NodeName=` of `slurmd -C`'s output (`NodeName=gpu-node1 CPUs=224 ...`)."""
    for line in text.splitlines():
        for word in line.split():
            if word.startswith("NodeName="):
                return word.removeprefix("NodeName=") or None
    return None


Run = Callable[..., subprocess.CompletedProcess]


def slurmd_node_name(
    *,
    which: Callable[[str], str | None] = shutil.which,
    run: Run = subprocess.run,
    timeout: float = SLURMD_TIMEOUT_S,
) -> tuple[str | None, str | None]:
    """The node name the local `slurmd -C` prints, and a warning when it could not say.

    No `slurmd` on PATH: (None, None), nothing to say on a server outside Slurm."""
    slurmd = which("slurmd")
    if slurmd is None:
        return None, None
    try:
        done = run([slurmd, "-C"], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, f"slurmd -C gave no answer in {timeout:g} s: no slurm_node_name"
    except OSError as exc:
        return None, f"slurmd -C failed ({exc.strerror or exc}): no slurm_node_name"
    if done.returncode != 0:
        return None, f"slurmd -C exited {done.returncode}: no slurm_node_name"
    name = parse_slurmd_node_name(done.stdout or "")
    if name is None:
        return None, "slurmd -C printed no NodeName=: no slurm_node_name"
    return name, None


def scheduler_nodes(
    *,
    kubernetes: str | None = None,
    slurm: str | None = None,
    env: Mapping[str, str] | None = None,
    ask_slurmd: Callable[[], tuple[str | None, str | None]] | None = None,
) -> SchedulerNodes:
    """The names this server declares: each flag first, then `env` and `ask_slurmd` (None
    when the report describes another machine, whose environment this is not)."""
    found = SchedulerNodes()
    k8s = kubernetes or next((env[k] for k in KUBERNETES_ENV if env and env.get(k)), None)
    if k8s:
        k8s = k8s.strip()
        if valid_kubernetes_name(k8s):
            found.names["kubernetes_node_name"] = k8s
        else:
            found.warnings.append(f"{k8s[:80]!r} is not a Kubernetes node name: left out")
    name, warning = (slurm, None) if slurm else (ask_slurmd() if ask_slurmd else (None, None))
    if warning:
        found.warnings.append(warning)
    if name:
        name = name.strip()
        if valid_slurm_name(name):
            found.names["slurm_node_name"] = name
        else:
            found.warnings.append(f"{name[:80]!r} is not a Slurm node name: left out")
    return found
