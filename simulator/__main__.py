"""`python -m simulator collect | push | fleet | keep-alive`: simulated servers through the
agent's own paths.

`collect` and `push` take the agent's options (backend, spool, interval, kernel log) and run
the agent's own collect and push loop, with a simulated server (`--profile`) in place of
live NVML; their output and exit statuses are the agent's. `fleet` pushes a whole simulated
fleet, one agent token per server. `keep-alive` keeps a pushed fleet reporting (the demo's;
its plan, tokens included, on stdin). None of this is installed on GPU servers.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from agent.__main__ import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    AgentParser,
    BadInput,
    Sources,
    add_backend_options,
    add_collect_and_push,
    add_kernel_log_options,
    cmd_collect,
    cmd_push,
    configure_logging,
    fail,
    run_command,
    saved_kernel_log,
)

from . import keepalive
from .fleet import fleet, parse_mix, push_reports
from .profiles import PROFILES, build
from .reports import simulate_report


def _server_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the simulated server")
    group.add_argument(
        "--profile", required=True, help=f"the kind of server: {', '.join(PROFILES)}"
    )
    group.add_argument("--seed", default="0", help="seed of the server's identity")
    group.add_argument("--hostname", help="its hostname (default: from the profile)")
    add_kernel_log_options(group)


def build_parser() -> argparse.ArgumentParser:
    parser = AgentParser(prog="python -m simulator", description="Cluster Atlas simulator")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=AgentParser)
    add_collect_and_push(commands, _server_options, server="a simulated server")

    many = commands.add_parser("fleet", help="push a simulated fleet, one token per server")
    add_backend_options(many)
    many.add_argument(
        "--servers", type=int, metavar="N", help="fleet size (default: the sum of the mix)"
    )
    many.add_argument(
        "--profile-mix",
        default="h100=1",
        metavar="MIX",
        help="weights per profile, e.g. h100=10,a100-mig=1,l40s=3",
    )
    many.add_argument("--concurrency", type=int, default=8, metavar="K")
    many.add_argument("--seed", default="0")

    alive = commands.add_parser(
        "keep-alive", help="post a fleet's reports and snapshots (a plan on stdin) every interval"
    )
    alive.add_argument("--url", required=True, help="the backend, e.g. http://127.0.0.1:8000")
    alive.add_argument("--interval", type=float, default=30.0, metavar="SECONDS")
    alive.add_argument(
        "--patience",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="stop when the backend has not answered for this long (default 15)",
    )
    return parser


def simulated_sources(args: argparse.Namespace) -> Sources:
    """The agent's report source, played by a simulated server; events from a saved log only."""
    if args.profile not in PROFILES:
        raise BadInput(f"unknown profile {args.profile!r} (known: {', '.join(PROFILES)})")
    events = saved_kernel_log(args)
    machine = build(args.profile, seed=args.seed, hostname=args.hostname)
    return (lambda: simulate_report(machine)), events


def read_tokens(path: str) -> list[str]:
    """One token per line; blank lines and # comments skipped. ValueError names the file only."""
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read token file {path}: {exc.strerror}") from exc
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def cmd_fleet(args: argparse.Namespace) -> int:
    configure_logging(logging.WARNING)
    try:
        counts = parse_mix(args.profile_mix, args.servers)
        tokens = read_tokens(args.token_file)
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    servers = fleet(counts, seed=args.seed)
    if len(tokens) < len(servers):
        raise BadInput(
            f"{len(servers)} servers need {len(servers)} tokens, one per line (a token is bound "
            f"to the first server it reports); {args.token_file} has {len(tokens)}"
        )
    configure_logging(logging.WARNING, *tokens)
    reports = [server.report() for server in servers]
    try:
        results = push_reports(
            args.url,
            tokens,
            reports,
            args.concurrency,
            ca_bundle=args.ca_bundle,
            insecure=args.insecure,
        )
    except ValueError as exc:
        raise BadInput(str(exc)) from exc
    for server, result in zip(servers, results, strict=True):
        detail = (
            f"id {result.answer.get('id')} {result.answer.get('status')}"
            if result.answer is not None
            else result.error
        )
        print(
            f"{server.hostname:<14} {server.profile:<15} {server.rack:<8} {result.outcome:<11} "
            f"{detail}"
        )
    sent = sum(1 for r in results if r.outcome == "sent")
    print(f"{sent} of {len(results)} reports sent")
    if any(r.outcome == "refused" for r in results):
        return fail(EXIT_REFUSED, "the backend refused some reports (see above)")
    if sent < len(results):
        return fail(EXIT_UNREACHABLE, "the backend was unreachable for some reports")
    return EXIT_OK


def cmd_keep_alive(args: argparse.Namespace) -> int:
    if args.interval <= 0 or args.patience <= 0:
        raise BadInput("--interval and --patience must be positive")
    try:
        plan = keepalive.Plan.from_json(sys.stdin.read())
    except (ValueError, TypeError) as exc:
        raise BadInput(f"the plan on stdin is not a keep-alive plan: {exc}") from exc
    reason = keepalive.run(args.url, plan, interval=args.interval, patience_s=args.patience)
    print(f"keep-alive: {reason}", file=sys.stderr)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "collect": lambda a: cmd_collect(a, simulated_sources),
        "push": lambda a: cmd_push(a, simulated_sources),
        "fleet": cmd_fleet,
        "keep-alive": cmd_keep_alive,
    }
    return run_command(lambda: handlers[args.command](args))


if __name__ == "__main__":
    sys.exit(main())
