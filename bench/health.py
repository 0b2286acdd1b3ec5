"""Benchmark: GPU health, on the agent and in the backend, each beside a floor.

1. The agent's kernel log parser on a log of 1,000,000 lines (a realistic mix: one line in ten
   an Xid of 8 GPUs; and a storm: every line one Xid), beside the floor of reading the same
   file line by line with one regex. Time and peak memory (tracemalloc) of each.
2. Events from a 25,000-server fleet (8 GPUs each), one event per server: the report carrying
   it posted through the API (received, validated, stored, applied) beside bench/ingest.py's
   floor (a bare DRF view that parses the JSON and updates one row) and the heartbeat; then
   the health sweep recording all 25,000 reports' events and counters.

The fleet is bulk-loaded (servers, GPUs, bound tokens, each server's last report hash as if
its report had been applied), so the run measures ingest, not the set-up. BENCH_HEALTH_POSTS
reports (default 1,000) go through the whole API path; the rest are stored as that path
leaves them (applied; without links and NICs, which health does not read, to keep the
database small), and the sweep records all 25,000.

    .venv/bin/python bench/health.py              # agent, then backend on SQLite (+ PostgreSQL)
    .venv/bin/python bench/health.py --agent
    DATABASE_URL=postgres://... .venv/bin/python bench/health.py --backend
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from _django import ROOT, median, postgres_url, setup, timed

LINES = int(os.environ.get("BENCH_HEALTH_LINES", "1000000"))
SERVERS = int(os.environ.get("BENCH_HEALTH_SERVERS", "25000"))
POSTS = int(os.environ.get("BENCH_HEALTH_POSTS", "1000"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "300"))
BOOT = datetime(2026, 11, 30, tzinfo=UTC)
FLOOR = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)\): (\d+)")
NOISE = (
    '[{t:12.6f}] audit: type=1400 audit({t:.3f}:{n}): apparmor="ALLOWED" operation="open" '
    'profile="snap.lxd" name="/proc/{n}/status" pid={n}',
    "[{t:12.6f}] mlx5_core 0000:1a:00.0: mlx5e_ethtool_get_link_ksettings:{n}: link speed",
    "[{t:12.6f}] EXT4-fs (nvme0n1p{n3}): mounted filesystem with ordered data mode. Opts: (null)",
)
BUSES = [f"0000:{b:02x}:00" for b in (0x19, 0x3B, 0x4C, 0x5D, 0x9B, 0xBB, 0xCB, 0xDB)]


# -- 1. the agent ------------------------------------------------------------------------------


def write_log(path: Path, *, storm: bool) -> None:
    with path.open("w") as out:
        for n in range(LINES):
            t = 100 + n * 0.001
            if storm or n % 10 == 0:
                bus = BUSES[n % 8] if not storm else BUSES[4]
                code = 31 if storm else (13, 31, 43, 94)[(n // 10) % 4]
                out.write(
                    f"[{t:12.6f}] NVRM: Xid (PCI:{bus}): {code}, pid={n}, name=python, "
                    "Ch 00000010, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0\n"
                )
            else:
                out.write(NOISE[n % 3].format(t=t, n=n, n3=n % 3) + "\n")


def floor(path: Path) -> int:
    found = 0
    with path.open(encoding="utf-8", errors="replace") as stream:
        for line in stream:
            if FLOOR.search(line):
                found += 1
    return found


def parse(path: Path) -> int:
    from agent.sources.kernel_log import iter_lines, parse_kernel_log

    with path.open(encoding="utf-8", errors="replace") as stream:
        events, _ = parse_kernel_log(iter_lines(stream), boot_time=BOOT)
    return sum(e.count for e in events if e.kind == "xid")


def measure(fn, path: Path) -> tuple[float, int, int]:
    """(best seconds of 3, peak traced bytes, result)."""
    best = min(timed(lambda: fn(path), 3))
    tracemalloc.start()
    result = fn(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak, result


def run_agent() -> None:
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        print(f"\nagent: parsing a kernel log of {LINES:,} lines (best of 3; peak by tracemalloc)")
        print(f"  {'log':<34}{'time':>10}{'x floor':>9}{'peak':>12}{'Xid lines':>12}")
        for name, storm in (
            ("mixed (1 line in 10 an Xid)", False),
            ("storm (every line Xid 31)", True),
        ):
            path = Path(tmp) / "kern.log"
            write_log(path, storm=storm)
            size = path.stat().st_size
            f_time, f_peak, f_found = measure(floor, path)
            p_time, p_peak, p_found = measure(parse, path)
            assert f_found == p_found, (f_found, p_found)
            print(f"  {name + f', {size / 2**20:.0f} MiB':<34}")
            for label, (t, peak, found) in (
                ("floor: lines + one regex", (f_time, f_peak, f_found)),
                ("agent parser", (p_time, p_peak, p_found)),
            ):
                print(
                    f"    {label:<32}{t:>9.2f}s{t / f_time:>9.2f}"
                    f"{peak / 2**10:>10.0f}KiB{found:>12,}"
                )


# -- 2. the backend ----------------------------------------------------------------------------


@contextmanager
def counting(connection):
    """Counts the queries run inside (without keeping them, unlike CaptureQueriesContext)."""
    count = [0]

    def wrapper(execute, sql, params, many, context):
        count[0] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield count


def run_backend() -> None:
    setup()
    from _django import bench_database
    from celery.signals import task_success
    from django.db import connection
    from django.test import Client
    from django.test.utils import override_settings
    from django.urls import include, path
    from django.utils import timezone
    from rest_framework.response import Response
    from rest_framework.views import APIView

    from config.celery import _after_report_in_process, app
    from health.models import GpuCounterSample, HealthEvent
    from health.services import health_sweep
    from inventory.api.authentication import AgentTokenAuthentication, IsAgent
    from inventory.choices import ReportStatus
    from inventory.identity import server_identity
    from inventory.models import AgentToken, Gpu, Report, Server
    from inventory.services import agent_token_create, report_apply, report_receive
    from inventory.services.ingest import content_hash
    from inventory.services.tokens import TOKEN_PREFIX, token_digest
    from simulator.fleet import fleet

    class FloorView(APIView):
        """Parse the JSON, update one row: what any ingest must at least do."""

        authentication_classes = [AgentTokenAuthentication]
        permission_classes = [IsAgent]

        def post(self, request):
            json.loads(request.body)
            Server.objects.filter(pk=request.auth.server_id).update(last_seen=timezone.now())
            return Response({"status": "ok"}, status=202)

    module = type(sys)("bench_urls")
    module.urlpatterns = [path("floor/", FloorView.as_view()), path("", include("config.urls"))]
    sys.modules["bench_urls"] = module
    app.conf.task_always_eager = True
    task_success.disconnect(_after_report_in_process)  # the sweep is timed on its own

    with bench_database() as (vendor, _), override_settings(ROOT_URLCONF="bench_urls"):
        client = Client()
        template = fleet({"h100": 1}, seed="bench-health")[0].report()
        template["events"] = []

        # a real first report, applied: the shape of every server's rows
        first_token, _ = agent_token_create(name="template")
        report_apply(
            report_id=report_receive(
                token=first_token, body=json.dumps(template).encode()
            ).report_id
        )

        def report_of(n: int) -> dict:
            report = copy.deepcopy(template)
            report["host"]["hostname"] = f"dgx-{n:05d}"
            report["host"]["system_uuid"] = f"00000000-0000-4000-8000-{n:012d}"
            report["host"]["machine_id"] = None
            for gpu in report["gpus"]:
                gpu["uuid"] = f"GPU-{n:08d}-0000-4000-8000-{gpu['index']:012d}"
                gpu["serial"] = f"16{n:07d}{gpu['index']:02d}"
            return report

        started = time.perf_counter()
        template_gpus = list(Gpu.objects.filter(server__hostname=template["host"]["hostname"]))

        def key_of(n: int) -> str:
            return f"{TOKEN_PREFIX}bench-{n:06d}"

        for chunk in range(0, SERVERS, 1000):  # made on demand: 25,000 reports held would be GBs
            batch = [report_of(n) for n in range(chunk, min(chunk + 1000, SERVERS))]
            created = Server.objects.bulk_create(
                [
                    Server(
                        identity=server_identity(report["host"]),
                        hostname=report["host"]["hostname"],
                        system_uuid=report["host"]["system_uuid"],
                        last_seen=timezone.now(),
                        last_report_hash=content_hash(report),
                    )
                    for report in batch
                ]
            )
            if any(s.pk is None for s in created):  # backends that return no ids
                names = [s.hostname for s in created]
                created = list(Server.objects.filter(hostname__in=names).order_by("hostname"))
            tokens, gpus = [], []
            for n, report, server in zip(range(chunk, SERVERS), batch, created, strict=False):
                tokens.append(
                    AgentToken(
                        name=server.hostname,
                        key_hash=token_digest(key_of(n)),
                        prefix=key_of(n)[:10],
                        identity=server.identity,
                        server=server,
                    )
                )
                for row, gpu in zip(template_gpus, report["gpus"], strict=True):
                    gpus.append(
                        Gpu(
                            server=server,
                            index=gpu["index"],
                            uuid=gpu["uuid"],
                            serial=gpu["serial"],
                            name=row.name,
                            pci_bus_id=row.pci_bus_id,
                        )
                    )
            AgentToken.objects.bulk_create(tokens)
            Gpu.objects.bulk_create(gpus)
        setup_s = time.perf_counter() - started

        def poster(url: str, body: bytes, key: str):
            headers = {"HTTP_AUTHORIZATION": f"Token {key}"}

            def post():
                response = client.post(url, data=body, content_type="application/json", **headers)
                assert response.status_code == 202, response.content
                return response

            return post

        def with_event(n: int) -> bytes:
            report = report_of(n)
            bus = report["gpus"][n % 8]["pci_bus_id"]
            report["events"] = [
                {
                    "kind": "xid",
                    "code": (79, 48, 13, 31)[n % 4],
                    "pci_bus_id": bus,
                    "gpu_uuid": report["gpus"][n % 8]["uuid"],
                    "time": "2026-11-30T08:00:00Z",
                    "last_time": None,
                    "message": "pid=1, name=python",
                    "count": 1,
                    "key": f"kmsg:boot-{n}:{n}",
                }
            ]
            return json.dumps(report).encode()

        # floor and heartbeat, interleaved (bench/ingest.py's floor)
        body0 = json.dumps(report_of(0)).encode()
        floor_post = poster("/floor/", body0, key_of(0))
        heartbeat = poster("/api/v1/reports/", body0, key_of(0))
        for fn in (floor_post, heartbeat):
            fn()
        floor_times, heartbeat_times = [], []
        for _ in range(REPEAT):
            floor_times += timed(floor_post, 1)
            heartbeat_times += timed(heartbeat, 1)
        floor_t, heartbeat_t = median(floor_times), median(heartbeat_times)
        assert heartbeat().json()["status"] == "unchanged"

        # event reports through the whole API path: received, validated, stored, applied
        sample = range(1, 1 + POSTS)
        bodies = {n: with_event(n) for n in sample}
        event_times = []
        with counting(connection) as posted:
            for n in sample:
                event_times += timed(poster("/api/v1/reports/", bodies[n], key_of(n)), 1)
        event_t = median(event_times)
        assert Report.objects.filter(status=ReportStatus.APPLIED).count() == POSTS + 1

        # the rest of the fleet's event reports, stored as apply leaves them
        now = timezone.now()
        ids = dict(Server.objects.values_list("hostname", "id"))
        for start in range(1 + POSTS, SERVERS, 1000):
            rest = []
            for n in range(start, min(start + 1000, SERVERS)):
                payload = json.loads(with_event(n))
                payload["links"], payload["nics"] = [], []
                rest.append(
                    Report(
                        identity=server_identity(payload["host"]),
                        server_id=ids[payload["host"]["hostname"]],
                        payload=payload,
                        content_hash=content_hash(payload),
                        status=ReportStatus.APPLIED,
                        applied_at=now,
                    )
                )
            Report.objects.bulk_create(rest, batch_size=500)

        with counting(connection) as swept:
            started = time.perf_counter()
            recorded = 0
            while True:
                done = health_sweep(batch=500, budget_s=3600)
                recorded += done
                if not done:
                    break
            sweep_s = time.perf_counter() - started
        events = HealthEvent.objects.count()
        samples = GpuCounterSample.objects.count()
        assert events == SERVERS - 1, events

        print(
            f"\n{vendor}: {SERVERS:,} servers x 8 GPUs bulk-loaded in {setup_s:.0f} s; "
            f"an 8-GPU report is {len(body0):,} bytes"
        )
        print(f"  {'path':<48}{'per report':>12}{'x floor':>9}")
        print(f"  {'floor (parse JSON, update one row)':<48}{floor_t * 1000:>10.2f}ms{1:>9.2f}")
        ratio = heartbeat_t / floor_t
        print(f"  {'heartbeat (unchanged report)':<48}{heartbeat_t * 1000:>10.2f}ms{ratio:>9.2f}")
        print(
            f"  {f'report + 1 event, received and applied ({POSTS:,})':<48}"
            f"{event_t * 1000:>10.2f}ms{event_t / floor_t:>9.2f}"
            f"   ({posted[0] / POSTS:.1f} queries each)"
        )
        per = sweep_s / max(recorded, 1)
        print(
            f"  {f'health sweep: events + counters of {recorded:,} reports':<48}"
            f"{per * 1000:>10.2f}ms{per / floor_t:>9.2f}"
            f"   ({sweep_s:.1f} s in all, {swept[0] / max(recorded, 1):.2f} queries per report)"
        )
        print(
            f"  {SERVERS:,} servers' events in all: ingest ~{event_t * SERVERS:.0f} s "
            f"(vs heartbeats {heartbeat_t * SERVERS:.0f} s, floor {floor_t * SERVERS:.0f} s) + "
            f"sweep {per * SERVERS:.0f} s; {events:,} event rows, {samples:,} counter samples"
        )


def main() -> None:
    if "--agent" in sys.argv:
        run_agent()
        return
    if "--backend" in sys.argv:
        run_backend()
        return
    here = Path(__file__).resolve().parent
    subprocess.run([sys.executable, str(here / "health.py"), "--agent"], check=True)
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    runs = [env]
    pg = postgres_url()
    if pg:
        runs.append({**env, "DATABASE_URL": pg})
    else:
        print("PostgreSQL not reachable: SQLite only (set BENCH_POSTGRES_URL)")
    for run_env in runs:
        subprocess.run(
            [sys.executable, str(here / "health.py"), "--backend"], env=run_env, check=True
        )


if __name__ == "__main__":
    main()
