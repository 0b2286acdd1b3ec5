"""`manage.py placement_summaries [--all]`: build the per-server and per-leaf placement
summaries (the backfill after upgrading; beat keeps them fresh afterwards)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from inventory.models import Server
from placement.leaf_summaries import leaf_summaries_refresh
from placement.summaries import placement_summaries_refresh


class Command(BaseCommand):
    help = "Build the placement summaries of servers without a fresh one (--all: every server)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="rebuild every server's summary")

    def handle(self, *args: Any, **options: Any) -> None:
        ids = list(Server.objects.values_list("pk", flat=True)) if options["all"] else None
        done = placement_summaries_refresh(server_ids=ids)
        self.stdout.write(f"{done} placement summaries built")
        leaves = leaf_summaries_refresh(force=options["all"])
        if leaves is not None:
            self.stdout.write(f"{leaves} leaf summaries built")
