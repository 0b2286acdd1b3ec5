"""Benchmark: the cost of an agent report, heartbeat and changed, against a floor.

The floor is a bare Django view behind the project's own URLs and middleware that does the
minimum any ingest must: look the token up (one query), parse the JSON, hash it, update one
row. Goals (issues 2, 11): the heartbeat path at most 1.5x that floor; a changed report in a
fixed number of queries whatever its GPU count. The heartbeat by digest (the agent names
its facts' digest in a header, the body is empty) is shown beside them. The floor view is
behind every middleware of the project, as any view is; heartbeats are answered by
AgentHeartbeatMiddleware right after SecurityMiddleware, which is part of what they save
(bench/load.py compares them with a bare WSGI app instead).

    .venv/bin/python bench/ingest.py            # SQLite, and PostgreSQL when it answers
    DATABASE_URL=postgres://... .venv/bin/python bench/ingest.py --one
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys

from _django import median, postgres_url, setup, timed

REPEAT = int(os.environ.get("BENCH_REPEAT", "300"))


def run_one() -> None:
    setup()
    from _django import bench_database
    from celery.signals import task_success
    from django.db import connection
    from django.http import JsonResponse
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, override_settings
    from django.urls import include, path
    from django.utils import timezone
    from django.views.decorators.csrf import csrf_exempt

    from agent.schema import report_digest
    from config.celery import _after_report_in_process, app
    from inventory.models import AgentToken, Server
    from inventory.services import agent_token_create
    from inventory.services.tokens import token_digest
    from simulator.fleet import fleet

    @csrf_exempt
    def floor_view(request):
        """Token lookup, parse, hash, one UPDATE: what any ingest must at least do."""
        key = request.META["HTTP_AUTHORIZATION"].split()[1]
        server_id = (
            AgentToken.objects.filter(key_hash=token_digest(key), revoked_at__isnull=True)
            .values_list("server_id", flat=True)
            .first()
        )
        json.loads(request.body)
        hashlib.sha256(request.body).hexdigest()
        Server.objects.filter(pk=server_id).update(last_seen=timezone.now())
        return JsonResponse({"status": "unchanged"}, status=202)

    module = type(sys)("bench_urls")
    module.urlpatterns = [path("floor/", floor_view), path("", include("config.urls"))]
    sys.modules["bench_urls"] = module
    app.conf.task_always_eager = True
    task_success.disconnect(_after_report_in_process)  # measure ingest, not reconciliation

    with bench_database() as (vendor, _), override_settings(ROOT_URLCONF="bench_urls"):
        client = Client()

        def poster(url: str, body: bytes, key: str, expect: int = 202, **extra):
            headers = {"HTTP_AUTHORIZATION": f"Token {key}", **extra}

            def post():
                response = client.post(url, data=body, content_type="application/json", **headers)
                assert response.status_code == expect, response.content
                return response

            return post

        def queries(fn) -> int:
            with CaptureQueriesContext(connection) as ctx:
                fn()
            return len(ctx.captured_queries)

        machine = fleet({"a100-mig": 1}, seed="bench")[0]
        report = machine.report()
        body = json.dumps(report).encode()
        _, key = agent_token_create(name="bench")
        poster("/api/v1/reports/", body, key)()  # first report: creates the server

        heartbeat = poster("/api/v1/reports/", body, key)
        floor = poster("/floor/", body, key)
        digest = f"sha256:{report_digest(report)}"
        by_digest = poster("/api/v1/reports/", b"", key, 200, HTTP_X_ATLAS_REPORT_DIGEST=digest)
        for fn in (heartbeat, floor, by_digest):
            fn()
        # Interleaved, so drift on a busy machine hits all alike.
        floor_times, heartbeat_times, digest_times = [], [], []
        for _ in range(REPEAT):
            floor_times += timed(floor, 1)
            heartbeat_times += timed(heartbeat, 1)
            digest_times += timed(by_digest, 1)
        floor_t, heartbeat_t = median(floor_times), median(heartbeat_times)
        digest_t = median(digest_times)
        assert heartbeat().json()["status"] == "unchanged"
        assert by_digest().json()["status"] == "unchanged"

        counter = iter(range(10**9))

        def changed_report(source: dict) -> bytes:
            changed = copy.deepcopy(source)
            changed["gpus"][0]["ecc_errors_corrected"] = next(counter)
            return json.dumps(changed).encode()

        def changed():
            poster("/api/v1/reports/", changed_report(report), key)()

        changed_t = median(timed(changed, max(REPEAT // 5, 20)))

        one_gpu = fleet({"a100-mig": 2}, seed="bench")[1].report()  # another server
        one_gpu["gpus"] = one_gpu["gpus"][:1]
        one_gpu["links"] = [
            link
            for link in one_gpu.get("links", [])
            if all(end == "gpu:0" or end.startswith("nic:") for end in (link["a"], link["b"]))
        ]
        _, key1 = agent_token_create(name="bench-1")
        poster("/api/v1/reports/", json.dumps(one_gpu).encode(), key1)()

        q_floor = queries(floor)
        heartbeat()  # the same facts again: from here on the heartbeat path
        q_heartbeat = queries(heartbeat)
        q_digest = queries(by_digest)
        q_changed_8 = queries(lambda: poster("/api/v1/reports/", changed_report(report), key)())
        poster("/api/v1/reports/", changed_report(one_gpu), key1)()
        q_changed_1 = queries(lambda: poster("/api/v1/reports/", changed_report(one_gpu), key1)())
        gpus = len(report["gpus"])
        migs = sum(len(g.get("mig_devices", [])) for g in report["gpus"])
        print(
            f"\n{vendor}: a {gpus}-GPU report with {migs} MIG devices and "
            f"{len(report.get('links', []))} links, {len(body):,} bytes; median of {REPEAT} posts"
        )
        print(f"  {'path':<44}{'time per report':>18}{'x floor':>10}{'queries':>10}")
        rows = [
            ("floor (bare Django: token, parse, hash, UPDATE)", floor_t, q_floor),
            ("heartbeat (unchanged report)", heartbeat_t, q_heartbeat),
            ("heartbeat by digest (header, empty body)", digest_t, q_digest),
            (f"changed report, {gpus} GPUs, applied", changed_t, q_changed_8),
            ("changed report, 1 GPU, applied", None, q_changed_1),
        ]
        for name, seconds, count in rows:
            shown = f"{seconds * 1000:.2f} ms" if seconds is not None else "-"
            ratio = f"{seconds / floor_t:.2f}" if seconds is not None else "-"
            print(f"  {name:<44}{shown:>18}{ratio:>10}{count:>10}")
        verdict = "met" if heartbeat_t <= 1.5 * floor_t else "MISSED"
        print(
            f"  goal heartbeat <= 1.5x floor: {heartbeat_t / floor_t:.2f}x, {verdict}; "
            f"changed-report queries {q_changed_1} (1 GPU) vs {q_changed_8} ({gpus} GPUs): "
            f"{'constant' if q_changed_1 == q_changed_8 else 'NOT constant'}"
        )


def main() -> None:
    if "--one" in sys.argv:
        run_one()
        return
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    runs = [("sqlite", env)]
    pg = postgres_url()
    if pg:
        runs.append(("postgresql", {**env, "DATABASE_URL": pg}))
    else:
        print("PostgreSQL not reachable: SQLite only (set BENCH_POSTGRES_URL)")
    for _, run_env in runs:
        subprocess.run(
            [sys.executable, os.path.join(here, "ingest.py"), "--one"], env=run_env, check=True
        )


if __name__ == "__main__":
    main()
