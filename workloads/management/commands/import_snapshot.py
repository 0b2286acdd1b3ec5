"""Import a saved scheduler output for a cluster: a node set or pod list (kubectl, scontrol,
sinfo, slurmrestd), or a jobs listing (slurmrestd jobs, squeue --json, scontrol show job -d,
sacct --json). It lives in the workloads layer, which routes jobs listings first."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from clusters.selectors import open_findings_by_severity
from clusters.services import POD_FORMAT, SnapshotRejected, snapshot_ingest
from core.safe_input import json_loads
from workloads.services.intake import jobs_detect, jobs_ingest, pods_ingest


class Command(BaseCommand):
    help = (
        "Import a saved scheduler snapshot for a cluster (format detected); the reconcile "
        "follows (here without a broker, by a worker with one)."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="the cluster's name; created when new")
        parser.add_argument("file", help="the saved output, or - for standard input")
        parser.add_argument(
            "--confirm-shrink",
            action="store_true",
            help="apply even if half or more of the cluster's live nodes (or more than "
            "ATLAS_SNAPSHOT_MAX_GONE_NODES) would be gone",
        )

    def handle(self, *args, name: str, file: str, confirm_shrink: bool = False, **options):
        if file == "-":
            import sys

            raw = sys.stdin.buffer.read()
        else:
            path = Path(file)
            if not path.is_file():
                raise CommandError(f"no such file: {file}")
            raw = path.read_bytes()
        try:
            with transaction.atomic():
                jobs = jobs_detect(raw)
                if jobs is not None:
                    applied = jobs_ingest(cluster_name=name, snapshot=jobs)
                    self.stdout.write(
                        f"{applied.cluster} ({jobs.scheduler}): {applied.format}, "
                        f"{applied.workloads} workloads, {applied.created} new, "
                        f"{applied.changed} changed, {applied.ended} ended"
                    )
                    return
                result = snapshot_ingest(cluster_name=name, raw=raw, confirm_shrink=confirm_shrink)
                if result.status == "applied" and result.format == POD_FORMAT:
                    pods_ingest(cluster_name=name, document=json_loads(raw.decode()))
        except SnapshotRejected as exc:
            raise CommandError(str(exc)) from None
        if result.status != "applied":
            raise CommandError(result.message or f"snapshot {result.status}")
        # snapshot_ingest requested the reconcile on commit: in-process it has run already.
        self.stdout.write(
            f"{result.cluster} ({result.kind}): {result.format}, {result.nodes} nodes, "
            f"{result.added} new, {result.gone} gone; "
            f"{sum(open_findings_by_severity().values())} open findings"
        )
