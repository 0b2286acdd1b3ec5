"""`python -m agent collect | push`: the agent's command line, what runs on a GPU server.

Exit status: 0 success; 2 bad input (arguments, unreadable or unparsable files); 3 NVML
unavailable (the report, with its host facts and `nvml_error`, is still printed or sent);
4 backend unreachable (the report is spooled when a spool is set); 5 the backend refused the
report or the token. Every failure prints one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn, Protocol

from . import __version__
from .enroll import (
    AGENT_TOKEN_FILE,
    ENV_ENROLLMENT_TOKEN,
    EnrollmentRefused,
    enroll,
    enrollment_identity,
    store_agent_token,
)
from .host import SysHost
from .transport import (
    DeliveryError,
    PermanentError,
    RedactingFilter,
    Sender,
    Spool,
    TransientError,
    Transport,
    read_token,
)

POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"  # the kubelet's default
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_NO_NVML = 3
EXIT_UNREACHABLE = 4
EXIT_REFUSED = 5
PROG = "cluster-atlas-agent"

logger = logging.getLogger("agent")


class EventSource(Protocol):
    """GPU events for the next report; `commit` once that report was delivered."""

    warnings: list[str]

    def poll(self) -> list[Any]: ...
    def commit(self) -> None: ...


class BadInput(Exception):
    """Input the agent cannot use: reported as one line, exit status 2."""


class AgentParser(argparse.ArgumentParser):
    """Bad arguments are one line on stderr and exit status 2, like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{PROG}: bad input: {message} (see --help)\n")


# A report source: the function making one report per call, and where its GPU events come from.
Sources = tuple[Callable[[], dict[str, Any]], EventSource | None]


def _source_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sources (default: live NVML and this machine's /sys)")
    group.add_argument(
        "--nvidia-smi-xml",
        metavar="FILE",
        help="saved `nvidia-smi -q -x` output (plain `nvidia-smi -q` also works, and "
        "`nvidia-smi -L`, sent marked partial: it has no bus ids, memory or health)",
    )
    group.add_argument("--topology", metavar="FILE", help="saved `nvidia-smi topo -m` output")
    group.add_argument("--hostname", help="the server the saved files came from")
    group.add_argument("--system-uuid", help="that server's SMBIOS system UUID")
    group.add_argument(
        "--allow-partial",
        action="store_true",
        help="send a saved file that was cut short (ends mid-GPU, before </nvidia_smi_log>, "
        "or a topo -m without its NIC legend) instead of refusing it: what it holds goes "
        "marked partial, so the backend marks nothing lost",
    )
    group.add_argument("--root", default="/", help=argparse.SUPPRESS)  # a fake tree, for tests
    add_scheduler_node_options(group)
    add_workload_options(group)
    add_kernel_log_options(group)
    group.add_argument(
        "--no-kernel-log", action="store_true", help="do not read this machine's kernel log"
    )


def _node_name(valid: Callable[[str], bool], what: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        value = value.strip()
        if not valid(value):
            raise argparse.ArgumentTypeError(f"{value!r} is not a {what} node name")
        return value

    return parse


def add_scheduler_node_options(group: argparse._ArgumentGroup) -> None:
    """The scheduler nodes this server says it is (`agent.sources.scheduler_node`)."""
    from .sources.scheduler_node import valid_kubernetes_name, valid_slurm_name

    group.add_argument(
        "--kubernetes-node-name",
        metavar="NAME",
        type=_node_name(valid_kubernetes_name, "Kubernetes"),
        help="the Kubernetes node this server is (default: $NODE_NAME or "
        "$KUBERNETES_NODE_NAME, which the DaemonSet sets from spec.nodeName)",
    )
    group.add_argument(
        "--slurm-node-name",
        metavar="NAME",
        type=_node_name(valid_slurm_name, "Slurm"),
        help="the Slurm node this server is (default: what `slurmd -C` says, when installed)",
    )


def add_workload_options(group: argparse._ArgumentGroup) -> None:
    """What runs on the GPUs: saved compute apps, the proc root, the kubelet's socket."""
    group.add_argument(
        "--compute-apps",
        metavar="FILE",
        help="saved `nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory "
        "--format=csv` output (any columns and order; noheader, nounits): each GPU's "
        "processes, instead of NVML's",
    )
    group.add_argument(
        "--compute-apps-columns",
        metavar="LIST",
        help="the query's columns of a --compute-apps file saved with noheader "
        "(default gpu_uuid,pid,process_name,used_memory)",
    )
    group.add_argument(
        "--proc-root",
        metavar="DIR",
        help="where this machine's /proc is (default /proc; a container with the host's "
        "/proc mounted elsewhere): each GPU process's cgroup names its Slurm job or pod",
    )
    group.add_argument(
        "--pod-resources-socket",
        metavar="PATH",
        help="the kubelet's pod-resources socket: which pod holds which GPU (default "
        f"{POD_RESOURCES_SOCKET}, asked when it exists)",
    )
    group.add_argument(
        "--no-pod-resources",
        action="store_true",
        help="do not ask the kubelet's pod-resources socket",
    )


def add_kernel_log_options(group: argparse._ArgumentGroup) -> None:
    """`--kernel-log FILE [--boot-time ISO-8601]`: a saved log's GPU events join the report."""
    group.add_argument(
        "--kernel-log",
        metavar="FILE",
        help="saved kernel log (dmesg [--ctime | --time-format iso], journalctl -k): its GPU "
        "Xid/SXid events join the report (live NVML follows /dev/kmsg by itself)",
    )
    group.add_argument(
        "--boot-time",
        metavar="ISO-8601",
        help="when that log's host booted: plain dmesg counts seconds from then",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = AgentParser(prog="python -m agent", description="Cluster Atlas agent " + __version__)
    parser.add_argument("--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=AgentParser)
    add_collect_and_push(commands, _source_options, server="this server")
    return parser


def add_collect_and_push(
    commands: Any,
    source_options: Callable[[argparse.ArgumentParser], None],
    *,
    server: str,
) -> None:
    """The `collect` and `push` commands, their report source named by `source_options`."""
    collect = commands.add_parser("collect", help=f"print {server}'s report as JSON")
    source_options(collect)
    collect.add_argument("--compact", action="store_true", help="one line of JSON")

    push = commands.add_parser("push", help="collect and send, once or every --interval")
    source_options(push)
    add_push_options(push)


def add_push_options(push: argparse.ArgumentParser) -> None:
    """The backend and the push loop's options: --url, --token-file, --interval, --spool, ..."""
    add_backend_options(push, enrollment=True)
    push.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="repeat every SECONDS until SIGTERM (default: send once)",
    )
    push.add_argument(
        "--spool", metavar="DIR", help="keep reports here while the backend is unreachable"
    )
    push.add_argument(
        "--retries",
        type=int,
        default=3,
        metavar="N",
        help="retries of one report, with backoff, before it is spooled (default 3)",
    )
    push.add_argument(
        "--kernel-log-position",
        metavar="FILE",
        help="where the live kernel log position is kept, so a restart neither loses nor "
        "repeats GPU events",
    )
    push.add_argument(
        "--spool-max",
        type=int,
        default=100,
        metavar="N",
        help="reports kept in the spool, newest first (default 100)",
    )


def add_backend_options(parser: argparse.ArgumentParser, *, enrollment: bool = False) -> None:
    """--url, --token-file, TLS; with `enrollment`, --enroll-token-file and --state-dir as
    the other way to the agent token (then --token-file is optional)."""
    group = parser.add_argument_group("backend")
    group.add_argument("--url", required=True, help="the backend, e.g. https://atlas.example.com")
    group.add_argument(
        "--token-file",
        required=not enrollment,
        metavar="FILE",
        help="file holding the agent token"
        + (" (or enroll: --enroll-token-file and --state-dir)" if enrollment else ""),
    )
    if enrollment:
        group.add_argument(
            "--enroll-token-file",
            metavar="FILE",
            help="file holding the fleet's enrollment token (default: $ATLAS_ENROLLMENT_TOKEN), "
            "traded once for this server's agent token, kept in --state-dir",
        )
        group.add_argument(
            "--state-dir",
            metavar="DIR",
            help="where the enrolled agent token is kept (DIR/agent-token, mode 0600)",
        )
    group.add_argument("--ca-bundle", metavar="FILE", help="CA certificates to verify TLS with")
    group.add_argument(
        "--insecure",
        action="store_true",
        help="do not verify the backend's TLS certificate (testing only)",
    )
    group.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")


# -- sources --------------------------------------------------------------------------------


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from exc


class Warnings:
    """Warnings about input files on stderr, each once however many cycles repeat it."""

    def __init__(self) -> None:
        self._told: set[str] = set()

    def tell(self, path: str, warning: str) -> None:
        line = f"{PROG}: warning: {path}: {warning}"
        if line not in self._told:
            self._told.add(line)
            print(line, file=sys.stderr)


STDERR_WARNINGS = Warnings()


def refuse_cut(path: str, cut: str | None, allow_partial: bool) -> None:
    """BadInput for a capture cut short, unless the user allowed a partial report."""
    if cut and not allow_partial:
        raise BadInput(
            f"{path}: {cut}; refused (--allow-partial sends what it holds, marked partial)"
        )


def saved_sources(args: argparse.Namespace) -> bool:
    """True when the report is built from saved files, not live NVML: an nvidia-smi capture,
    a matrix, or a saved kernel log naming another server (`--hostname`)."""
    named = args.hostname or args.system_uuid
    return bool(args.nvidia_smi_xml or args.topology or (args.kernel_log and named))


def report_source(args: argparse.Namespace) -> Callable[[], dict[str, Any]]:
    """A function making one report per call, from the sources the options name.

    The live NVML backend is created once, so its handle cache outlives the cycles.
    """
    if saved_sources(args):
        from .sources.saved import build_saved_report, parse_nvidia_smi
        from .sources.smi_types import SmiParseError
        from .sources.topo_matrix import parse_topo_matrix

        if args.system_uuid and not args.hostname:
            raise BadInput("--system-uuid needs --hostname (the server the files came from)")
        allow_partial = bool(getattr(args, "allow_partial", False))

        def from_files() -> dict[str, Any]:
            smi_log = topology = None
            try:
                if args.nvidia_smi_xml:
                    smi_log = parse_nvidia_smi(_read(args.nvidia_smi_xml))
            except SmiParseError as exc:
                raise BadInput(f"{args.nvidia_smi_xml}: {exc}") from exc
            try:
                if args.topology:
                    topology = parse_topo_matrix(_read(args.topology))
            except SmiParseError as exc:
                raise BadInput(f"{args.topology}: {exc}") from exc
            # A file cut short is refused before anything is said or sent, unless allowed.
            if smi_log is not None:
                refuse_cut(args.nvidia_smi_xml, smi_log.cut, allow_partial)
            if topology is not None:
                refuse_cut(args.topology, topology.cut, allow_partial)
            for path, parsed in ((args.nvidia_smi_xml, smi_log), (args.topology, topology)):
                for warning in parsed.warnings if parsed is not None else ():
                    STDERR_WARNINGS.tell(path, warning)
            return build_saved_report(
                smi_log=smi_log,
                topology=topology,
                hostname=args.hostname,
                system_uuid=args.system_uuid,
                host=None if args.hostname else SysHost(args.root),
            )

        from_files()  # fail on bad files now, not in the first cycle of a loop
        return from_files
    if args.system_uuid:
        raise BadInput(
            "--system-uuid names the server saved files came from: give it with --hostname "
            "and --nvidia-smi-xml, --topology or --kernel-log"
        )
    from .collector import collect as collect_report
    from .nvml import PynvmlBackend

    backend = PynvmlBackend()
    host = SysHost(args.root, hostname=args.hostname)
    procs = proc_root(args)
    return lambda: collect_report(backend, host, proc_root=procs)


def event_source(args: argparse.Namespace) -> EventSource | None:
    """Where the report's GPU events come from: a saved log, else this machine's live kernel
    log when the report describes this machine through live NVML; None for neither."""
    if args.kernel_log:
        return saved_kernel_log(args)
    live = not saved_sources(args)
    if args.no_kernel_log or not live or args.root != "/":
        return None
    from .kmsg import KernelLogFollower

    position = getattr(args, "kernel_log_position", None)
    return KernelLogFollower(state_file=Path(position) if position else None)


def saved_kernel_log(args: argparse.Namespace) -> EventSource | None:
    """The saved log `--kernel-log` names (None without one); BadInput when it cannot be read."""
    if not args.kernel_log:
        return None
    from .sources.kernel_log import SavedKernelLog

    boot_time = None
    if args.boot_time:
        try:
            boot_time = datetime.fromisoformat(args.boot_time.replace("Z", "+00:00"))
        except ValueError as exc:
            raise BadInput(f"--boot-time {args.boot_time!r}: {exc}") from exc
        if boot_time.tzinfo is None:
            boot_time = boot_time.astimezone()
    if not Path(args.kernel_log).is_file():
        raise BadInput(f"cannot read {args.kernel_log}: no such file")
    return SavedKernelLog(args.kernel_log, boot_time=boot_time)


def agent_sources(args: argparse.Namespace) -> Sources:
    """This server's report source (saved files or live NVML) and its GPU events."""
    events = event_source(args)
    return with_scheduler_nodes(with_workloads(report_source(args), args), args), events


def with_scheduler_nodes(
    make_report: Callable[[], dict[str, Any]], args: argparse.Namespace
) -> Callable[[], dict[str, Any]]:
    """The report source, with the scheduler nodes this server declares in its `host`.

    The environment and `slurmd` are asked only when the report describes this machine (not
    another server's saved files, nor a fake root): theirs would be this machine's names."""
    import os

    from .sources.scheduler_node import scheduler_nodes, slurmd_node_name

    here = args.root == "/" and not (saved_sources(args) and args.hostname)
    kubernetes = getattr(args, "kubernetes_node_name", None)
    slurm = getattr(args, "slurm_node_name", None)

    def make() -> dict[str, Any]:
        report = make_report()
        found = scheduler_nodes(
            kubernetes=kubernetes,
            slurm=slurm,
            env=os.environ if here else None,
            ask_slurmd=slurmd_node_name if here else None,
        )
        report["host"].update(found.names)
        if found.warnings:
            # Ours first: the schema keeps 256 warnings at most.
            report["warnings"] = [*found.warnings, *report.get("warnings", [])][:256]
        return report

    return make


def proc_root(args: argparse.Namespace) -> Path | None:
    """Where pids are looked up: --proc-root, else this machine's (the --root's) /proc; None
    when the report describes another server (--hostname with saved files)."""
    if getattr(args, "proc_root", None):
        return Path(args.proc_root)
    if saved_sources(args) and args.hostname:
        return None
    return Path(args.root) / "proc"


def pod_resources_socket(args: argparse.Namespace) -> str | None:
    """The kubelet socket to ask: the one named, else the default where it exists on a live
    report of this machine; None for none. Asked each cycle: a kubelet that starts after the
    agent is found by the next report."""
    if getattr(args, "no_pod_resources", False):
        return None
    named = getattr(args, "pod_resources_socket", None)
    if named:
        return str(named)
    return (
        POD_RESOURCES_SOCKET
        if may_ask_kubelet(args) and Path(POD_RESOURCES_SOCKET).exists()
        else None
    )


def may_ask_kubelet(args: argparse.Namespace) -> bool:
    """Whether the default kubelet socket may be asked: a live report of this machine."""
    if getattr(args, "no_pod_resources", False):
        return False
    return bool(getattr(args, "pod_resources_socket", None)) or (
        not saved_sources(args) and args.root == "/"
    )


def with_workloads(
    make_report: Callable[[], dict[str, Any]], args: argparse.Namespace
) -> Callable[[], dict[str, Any]]:
    """The report source, with saved compute apps on its GPUs and the kubelet's pod
    resources added, as the options ask."""
    apps_file = getattr(args, "compute_apps", None)
    if not apps_file and not may_ask_kubelet(args):
        return make_report
    read_apps = None
    apps_path = str(apps_file or "")
    if apps_file:
        from .sources.compute_apps import attach_compute_apps, parse_compute_apps
        from .sources.smi_types import SmiParseError

        columns = None
        if args.compute_apps_columns:
            columns = [c for c in args.compute_apps_columns.split(",") if c.strip()]

        def read_apps() -> Any:
            try:
                return parse_compute_apps(_read(apps_path), columns=columns)
            except SmiParseError as exc:
                raise BadInput(f"{apps_path}: {exc}") from exc

        read_apps()  # fail on a bad file now, not in the first cycle of a loop
    elif args.compute_apps_columns:
        raise BadInput("--compute-apps-columns needs --compute-apps")
    procs = proc_root(args)

    def make() -> dict[str, Any]:
        report = make_report()
        if read_apps is not None:
            apps = read_apps()
            for warning in apps.warnings:
                STDERR_WARNINGS.tell(apps_path, warning)
            attach_compute_apps(report, apps, proc_root=procs)
        socket = pod_resources_socket(args)
        if socket is not None:
            from .podresources import list_pod_resources

            report["pod_resources"] = list_pod_resources(socket)
        return report

    return make


def with_events(report: dict[str, Any], events: EventSource | None) -> dict[str, Any]:
    if events is None:
        return report
    from .sources.kernel_log import SavedKernelLog, attach_events

    try:
        found = events.poll()
    except OSError as exc:
        return attach_events(report, [], [f"kernel log unreadable: {exc}"])
    if isinstance(events, SavedKernelLog):  # its warnings on stderr too, as a saved capture's
        for warning in events.warnings:
            STDERR_WARNINGS.tell(events.path, warning)
    return attach_events(report, found, events.warnings)


# -- commands -------------------------------------------------------------------------------


def fail(status: int, message: str) -> int:
    """One line on stderr, then the exit status."""
    print(f"{PROG}: {message}", file=sys.stderr)
    return status


def cmd_collect(
    args: argparse.Namespace, sources: Callable[[argparse.Namespace], Sources] = agent_sources
) -> int:
    make_report, events = sources(args)
    report = with_events(make_report(), events)
    text = (
        json.dumps(report, separators=(",", ":")) if args.compact else json.dumps(report, indent=2)
    )
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    if report.get("nvml_error"):
        return fail(EXIT_NO_NVML, f"NVML unavailable: {report['nvml_error']}")
    return EXIT_OK


def configure_logging(level: int, *secrets: str) -> None:
    """Log lines on stderr, prefixed with the program, every secret replaced by ***."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter(*secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def enrollment_key(args: argparse.Namespace) -> str | None:
    """The enrollment token to trade, when push has no --token-file: --enroll-token-file,
    else $ATLAS_ENROLLMENT_TOKEN; None when neither is given (nor needed)."""
    if getattr(args, "enroll_token_file", None):
        try:
            return read_token(args.enroll_token_file)
        except ValueError as exc:
            raise BadInput(str(exc)) from exc
    return os.environ.get(ENV_ENROLLMENT_TOKEN, "").strip() or None


def obtain_token(
    args: argparse.Namespace,
    make_report: Callable[[], dict[str, Any]],
    stop: threading.Event,
) -> str:
    """The agent token: --token-file's, else the one enrolled in --state-dir, else enroll now
    with this server's identity and keep the token there. A refused enrollment is BadInput
    (exit 2): retrying cannot fix a spent, expired, revoked or wrong token."""
    if args.token_file:
        try:
            return read_token(args.token_file)
        except ValueError as exc:
            raise BadInput(str(exc)) from exc
    state_dir = getattr(args, "state_dir", None)
    if not state_dir:
        raise BadInput("give --token-file, or --state-dir with an enrollment token to enroll")
    stored = Path(state_dir) / AGENT_TOKEN_FILE
    if stored.exists():
        try:
            return read_token(stored)
        except ValueError as exc:
            raise BadInput(str(exc)) from exc
    key = enrollment_key(args)
    if key is None:
        raise BadInput(
            f"{stored} does not exist: give --enroll-token-file or ${ENV_ENROLLMENT_TOKEN} "
            "to enroll"
        )
    configure_logging(logging.INFO if args.interval else logging.WARNING, key)
    identity = enrollment_identity(make_report())
    try:
        token = enroll(
            args.url,
            key,
            identity,
            attempts=None if args.interval else max(0, args.retries) + 1,
            wait=stop.wait,
            ca_bundle=args.ca_bundle,
            insecure=args.insecure,
            timeout=args.timeout,
        )
    except EnrollmentRefused as exc:
        raise BadInput(str(exc)) from None
    except (ValueError, OSError) as exc:  # a bad URL, an unreadable CA bundle
        raise BadInput(str(exc)) from exc
    try:
        store_agent_token(state_dir, token)
    except OSError as exc:
        raise BadInput(f"cannot keep the agent token in {state_dir}: {exc.strerror}") from exc
    logger.info("enrolled; agent token kept in %s", stored)
    return token


def cmd_push(
    args: argparse.Namespace, sources: Callable[[argparse.Namespace], Sources] = agent_sources
) -> int:
    if args.interval is not None and args.interval <= 0:
        raise BadInput("--interval must be positive")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    make_report, events = sources(args)
    try:
        token = obtain_token(args, make_report, stop)
    except TransientError as exc:
        return fail(EXIT_UNREACHABLE, f"enrollment failed: {exc}")
    try:  # redact the enrollment token too, where one was given (a kept token needs none)
        known = enrollment_key(args) or ""
    except BadInput:
        known = ""
    configure_logging(logging.INFO if args.interval else logging.WARNING, token, known)
    try:
        transport = Transport(
            args.url, token, ca_bundle=args.ca_bundle, insecure=args.insecure, timeout=args.timeout
        )
    except (ValueError, OSError) as exc:  # a bad URL, an unreadable CA bundle
        raise BadInput(str(exc)) from exc
    if args.insecure:
        logger.warning("TLS verification is off (--insecure): use only for testing")
    spool = Spool(args.spool, args.spool_max) if args.spool else None
    sender = Sender(transport, spool, attempts=max(0, args.retries) + 1, wait=stop.wait)

    while True:
        report = with_events(make_report(), events)
        try:
            delivery = sender.deliver(report)
        except PermanentError as exc:
            if events is not None and not exc.token_rejected:
                events.commit()  # refused as it is: sending these events again cannot help
            if args.interval is None or exc.token_rejected:
                return fail(EXIT_REFUSED, str(exc))
            logger.error("%s", exc)  # this report is dropped; the next cycle sends a new one
        except DeliveryError as exc:
            if args.interval is None:
                return fail(EXIT_UNREACHABLE, str(exc))
            logger.error("%s", exc)  # its events stay pending: the next report carries them
        else:
            if events is not None and delivery.outcome in ("sent", "spooled"):
                events.commit()
            if delivery.outcome == "sent":
                answer = delivery.answer or {}
                logger.info("report sent: id %s, %s", answer.get("id"), answer.get("status"))
            elif args.interval is None:
                where = f"; report spooled in {args.spool}" if delivery.outcome == "spooled" else ""
                return fail(EXIT_UNREACHABLE, f"{delivery.error}{where}")
        if args.interval is None:
            if report.get("nvml_error"):
                return fail(EXIT_NO_NVML, f"report sent, NVML unavailable: {report['nvml_error']}")
            return EXIT_OK
        # jitter keeps a fleet started together from reporting in lockstep
        if stop.wait(args.interval * random.uniform(0.9, 1.1)):
            logger.info("stopping (signal)")
            return EXIT_OK


def run_command(command: Callable[[], int]) -> int:
    """Run one command: its exit status, or bad input and Ctrl-C as one line on stderr."""
    try:
        return command()
    except BadInput as exc:
        return fail(EXIT_USAGE, f"bad input: {exc}")
    except KeyboardInterrupt:
        return fail(130, "interrupted")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers = {"collect": cmd_collect, "push": cmd_push}
    return run_command(lambda: handlers[args.command](args))


if __name__ == "__main__":
    sys.exit(main())
