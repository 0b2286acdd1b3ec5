"""Run Celery beat's schedule in this process: the embedded default's beat and worker."""

from __future__ import annotations

import logging
import signal
import threading

from celery import current_app
from django.core.management.base import BaseCommand, CommandError

from ...schedule import run_schedule


class Command(BaseCommand):
    help = (
        "Run the periodic tasks of CELERY_BEAT_SCHEDULE (sweeps, reconciliation, health, "
        "figures, alerts, webhooks) in this process at their intervals, for the embedded "
        "default with no broker (`make run` starts it). With a broker, run `celery beat` "
        "and a worker instead."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--with-server",
            metavar="URL",
            help="stop once the server at URL (the one `make run` starts) stops accepting "
            "connections",
        )
        parser.add_argument(
            "--patience",
            type=float,
            default=15.0,
            metavar="SECONDS",
            help="how long the server may be away before this stops (default 15)",
        )

    def handle(self, *args, with_server=None, patience=15.0, **options):
        if not current_app.conf.task_always_eager:
            raise CommandError(
                "a broker is configured (CELERY_BROKER_URL or REDIS_URL): run "
                "`celery -A config beat` and `celery -A config worker` instead"
            )
        if with_server and not with_server.startswith(("http://", "https://")):
            raise CommandError("--with-server takes the server's URL, e.g. http://127.0.0.1:8000")
        if options.get("verbosity", 1) < 2:  # beat's "Sending due task" line per run: -v 2
            logging.getLogger("celery.beat").setLevel(logging.WARNING)
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):  # `make run`'s Ctrl-C reaches this too
            signal.signal(signum, lambda *_: stop.set())
        why = run_schedule(current_app, stop=stop, server_url=with_server, patience_s=patience)
        self.stdout.write(f"runschedule: {why}")
