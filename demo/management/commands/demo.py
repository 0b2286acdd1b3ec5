"""Load the declared demo fleet through the real API; optionally keep it reporting."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from findings.models import Finding
from simulator.keepalive import spawn
from workloads.choices import WorkloadState
from workloads.models import Workload

from ...services import demo_load


class Command(BaseCommand):
    help = (
        "Load a simulated fleet (H100 DGX servers, an A100 in MIG mode, VMs on a KVM host, "
        "L40S PCIe servers, a login node) through the real API, with a Kubernetes and a "
        "Slurm cluster. Creates the user admin (password from ATLAS_DEMO_PASSWORD, default "
        "'admin') when absent. With --keep-alive URL, a background process keeps the fleet "
        "reporting to that server until it stops answering."
    )

    def add_arguments(self, parser):
        parser.add_argument("--seed", default="0", help="the same seed gives the same fleet")
        parser.add_argument(
            "--keep-alive",
            metavar="URL",
            help="then post the fleet's reports and snapshots to URL (the server `make run` "
            "starts) every --interval seconds, in the background, while it answers",
        )
        parser.add_argument("--interval", type=float, default=30.0, metavar="SECONDS")

    def handle(self, *args, seed: str = "0", keep_alive=None, interval=30.0, **options):
        if keep_alive and not keep_alive.startswith(("http://", "https://")):
            raise CommandError("--keep-alive takes the server's URL, e.g. http://127.0.0.1:8000")
        if interval <= 0:
            raise CommandError("--interval must be positive")
        load = demo_load(seed=seed)
        if load.admin_created:
            self.stdout.write("created user admin (change its password outside a demo)")
        for result in load.reports:
            if result.outcome != "sent":
                self.stderr.write(f"{result.hostname}: {result.outcome}: {result.error}")
        for snapshot, answer in zip(load.plan.snapshots, load.snapshots, strict=True):
            counts = answer.get("workloads")
            what = (
                f"{counts['workloads']} workloads"
                if isinstance(counts, dict) and answer.get("nodes") is None
                else f"{answer.get('nodes')} nodes"
            )
            self.stdout.write(f"snapshot {snapshot.cluster}: {answer.get('format')}, {what}")
        if load.fabric is not None:
            self.stdout.write(
                f"fabric {load.fabric.fabric}: {load.fabric.switches} switches, "
                f"{load.fabric.adapters} adapters, {load.fabric.unbound} unbound"
            )
        done = load.reconciled
        running = Workload.objects.filter(state=WorkloadState.RUNNING).count()
        self.stdout.write(
            self.style.SUCCESS(
                f"demo: {load.sent} servers reported, {done.nodes} nodes, {done.bound} bound, "
                f"{running} workloads running, "
                f"{Finding.objects.filter(resolved_at__isnull=True).count()} open findings"
            )
        )
        if keep_alive:
            process = spawn(keep_alive, load.plan, interval=interval)  # stderr: this one's
            self.stdout.write(
                f"demo: keeping the fleet reporting to {keep_alive} every {interval:g} s "
                f"(process {process.pid}; it stops with the server)"
            )
