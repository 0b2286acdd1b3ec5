"""The commands a person runs outside this tool to act on a server's scheduler nodes: drain and
resume a Slurm node, cordon and uncordon a Kubernetes node, the drain's reason taken from the
worst open finding.

Pure: plain data in, plain data out, no queries. Every value that came from an agent, a
scheduler or a finding is shell-quoted (`shlex.quote`), so a node name or a reason with a
space, a quote or `$(...)` is one word to the shell, never a command; the page escapes the
line again as HTML when it shows it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

SLURM, KUBERNETES = "slurm", "kubernetes"
REASON_CHARS = 120
"""How much of a finding's message a drain reason keeps: `sinfo -R` shows it on one line."""
NO_FINDING_REASON = "maintenance"


@dataclass(frozen=True)
class Command:
    label: str
    """What it does, in a word: `drain`, `resume`, `cordon`, `uncordon`."""
    text: str
    """The shell line, quoted: what the copy button puts on the clipboard."""


@dataclass(frozen=True)
class NodeCommands:
    node: str
    cluster: str
    kind: str
    commands: tuple[Command, ...]


def drain_reason(message: str | None) -> str:
    """A drain reason from the worst open finding's message: one line, at most REASON_CHARS
    characters, prefixed `atlas:` so whoever reads `sinfo -R` knows where it came from; the
    word `maintenance` when nothing is open."""
    text = re.sub(r"\s+", " ", message or "").strip()
    if not text:
        return NO_FINDING_REASON
    if len(text) > REASON_CHARS:
        text = text[: REASON_CHARS - 3].rstrip() + "..."
    return f"atlas: {text}"


def node_commands(*, kind: str, name: str, reason: str) -> tuple[Command, ...]:
    """The commands for one scheduler node (none for a kind this knows no commands of)."""
    node = shlex.quote(name)
    if kind == SLURM:
        return (
            Command(
                "drain",
                f"scontrol update nodename={node} state=drain reason={shlex.quote(reason)}",
            ),
            Command("resume", f"scontrol update nodename={node} state=resume"),
        )
    if kind == KUBERNETES:
        return (
            Command("cordon", f"kubectl cordon {node}"),
            Command("uncordon", f"kubectl uncordon {node}"),
        )
    return ()


def scheduler_commands(
    nodes: Iterable[tuple[str, str, str]], *, message: str | None
) -> list[NodeCommands]:
    """Per node, given as (kind, node name, cluster name), its commands, in the given order;
    `message` is the worst open finding's (None: nothing open)."""
    reason = drain_reason(message)
    out = []
    for kind, name, cluster in nodes:
        commands = node_commands(kind=kind, name=name, reason=reason)
        if commands:
            out.append(NodeCommands(node=name, cluster=cluster, kind=kind, commands=commands))
    return out
