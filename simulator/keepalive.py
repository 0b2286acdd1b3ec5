"""Keep a pushed fleet alive: its agents report and its schedulers' snapshots arrive again
every `interval`, through the real API, for as long as the backend answers.

The demo's fleet would otherwise turn stale five minutes after `make run`. The loop runs in
its own small process (`python -m simulator keep-alive`, the plan on stdin so no token is
on a command line or on disk) and ends by itself: when the backend stops answering once it
has answered (runserver stopped), when it never came up, when it refuses the fleet's tokens
(another demo re-issued them), or on SIGINT/SIGTERM (Ctrl-C reaches the whole foreground
process group). A report equal to the last one applied is a heartbeat for the backend: one
UPDATE, no new row, no finding.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from .fleet import push_reports
from .schedulers import Snapshot

REPOSITORY = Path(__file__).resolve().parents[1]


@dataclass
class Plan:
    """What one beat posts: each agent's report with its token, each snapshot with the API
    token of a person (snapshots are posted as a cron job with a user token would)."""

    agent_tokens: list[str] = field(repr=False)
    reports: list[dict[str, Any]] = field(repr=False)
    api_token: str = field(repr=False)
    snapshots: list[Snapshot] = field(default_factory=list, repr=False)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """The plan as `to_json` wrote it; ValueError or TypeError for anything else."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError("a plan is a JSON object")
        data["snapshots"] = [Snapshot(**s) for s in data.get("snapshots", [])]
        plan = cls(**data)
        if len(plan.agent_tokens) != len(plan.reports):
            raise ValueError("one agent token per report")
        return plan


@dataclass(frozen=True)
class Beat:
    """How one beat went: `sent` reports, `snapshots` applied, and whether the backend was
    `unreachable` or `refused` the fleet's credentials."""

    sent: int = 0
    snapshots: int = 0
    unreachable: bool = False
    refused: bool = False
    error: str = ""


def _stamped(report: dict[str, Any], now: datetime) -> dict[str, Any]:
    return {**report, "collected_at": now.strftime("%Y-%m-%dT%H:%M:%SZ")}


def post_snapshot(url: str, snapshot: Snapshot, token: str, *, timeout: float = 30) -> dict:
    """POST one snapshot body as is; returns the backend's JSON answer (raises urllib's errors)."""
    cluster = urllib.parse.quote(snapshot.cluster, safe="")
    request = urllib.request.Request(  # noqa: S310 - the backend's URL, http(s) only
        f"{url.rstrip('/')}/api/v1/clusters/{cluster}/snapshots/",
        data=snapshot.body.encode("utf-8"),
        method="POST",
        headers={"Authorization": f"Token {token}", "Content-Type": snapshot.content_type},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
        return json.loads(response.read() or b"{}")


def beat_once(url: str, plan: Plan, *, now: datetime | None = None) -> Beat:
    """Post every report (collected now) and, once they are in, every snapshot."""
    now = now or datetime.now(UTC)
    reports = [_stamped(r, now) for r in plan.reports]
    results = push_reports(url, plan.agent_tokens, reports, concurrency=4, attempts=1)
    sent = sum(1 for r in results if r.outcome == "sent")
    refused = [r for r in results if r.outcome == "refused"]
    if refused:
        return Beat(sent=sent, refused=True, error=f"{refused[0].hostname}: {refused[0].error}")
    if sent < len(results):
        lost = next(r for r in results if r.outcome != "sent")
        return Beat(sent=sent, unreachable=True, error=f"{lost.hostname}: {lost.error}")
    applied = 0
    for snapshot in plan.snapshots:
        try:
            post_snapshot(url, snapshot, plan.api_token)
        except urllib.error.HTTPError as exc:
            refused_now = exc.code in (401, 403)
            return Beat(sent, applied, refused=refused_now, error=f"{snapshot.cluster}: {exc}")
        except (urllib.error.URLError, OSError) as exc:
            return Beat(sent, applied, unreachable=True, error=f"{snapshot.cluster}: {exc}")
        applied += 1
    return Beat(sent=sent, snapshots=applied)


def keep_alive(
    beat: Callable[[], Beat],
    *,
    interval: float,
    stop: threading.Event,
    startup_s: float = 120.0,
    patience_s: float = 15.0,
    retry_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Beat every `interval` seconds until a reason to stop; returns that reason.

    Before the backend first answers, wait up to `startup_s` for it (runserver starting);
    after, a backend silent for `patience_s` (retried every `retry_s`, so an autoreload
    restart does not end the loop) has stopped. Refused credentials end it at once.
    """
    answered = False
    silent_since: float | None = None
    while not stop.is_set():
        outcome = beat()
        if outcome.refused:
            return f"the backend refused the fleet: {outcome.error}"
        if outcome.unreachable:
            silent_since = clock() if silent_since is None else silent_since
            if clock() - silent_since >= (patience_s if answered else startup_s):
                return "the backend stopped answering" if answered else "the backend never answered"
            stop.wait(retry_s)
            continue
        answered, silent_since = True, None
        stop.wait(interval)
    return "stopped"


def spawn(
    url: str,
    plan: Plan,
    *,
    interval: float = 30.0,
    patience_s: float = 15.0,
    stderr: IO[Any] | None = None,
    python: str = sys.executable,
) -> subprocess.Popen[bytes]:
    """Start `python -m simulator keep-alive` in the background, in this process group (so
    Ctrl-C stops it with the rest), handing it the plan on stdin."""
    read_end, write_end = os.pipe()
    try:
        process = subprocess.Popen(
            [
                python,
                "-m",
                "simulator",
                "keep-alive",
                "--url",
                url,
                "--interval",
                str(interval),
                "--patience",
                str(patience_s),
            ],
            cwd=REPOSITORY,
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    try:
        with os.fdopen(write_end, "wb") as plan_pipe:  # the child reads it all, then beats
            plan_pipe.write(plan.to_json().encode("utf-8"))
    except BrokenPipeError:  # it died first: its own stderr says why, its status shows it
        process.wait(10)
    return process


def run(url: str, plan: Plan, *, interval: float, patience_s: float) -> str:
    """The keep-alive process: beat until a reason to stop (SIGINT and SIGTERM included)."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return keep_alive(
        lambda: beat_once(url, plan), interval=interval, stop=stop, patience_s=patience_s
    )
