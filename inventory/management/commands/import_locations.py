"""`manage.py import_locations FILE`: racks, rack units and switch ports from a CSV file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inventory.services.locations import locations_import, locations_parse


class Command(BaseCommand):
    help = (
        "Set server racks and positions, and NIC switch ports, from CSV rows "
        "hostname,rack,position[,nic,switch,port] (a header row is optional; '-' reads stdin). "
        "Nothing is written when a row is wrong, unless --skip-errors."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="CSV file, or - for standard input")
        parser.add_argument(
            "--skip-errors", action="store_true", help="write the good rows, report the bad"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["file"]
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text("utf-8-sig")
        except OSError as exc:
            raise CommandError(f"cannot read {source}: {exc.strerror}") from None
        result = locations_import(rows=locations_parse(text), skip_errors=options["skip_errors"])
        for error in result.errors:
            self.stderr.write(error)
        if not result.applied:
            raise CommandError(f"{len(result.errors)} row(s) wrong; nothing written")
        self.stdout.write(
            f"{result.rows} rows: {result.servers_updated} servers and "
            f"{result.nics_updated} NICs updated"
        )
        if result.errors:
            raise CommandError(f"{len(result.errors)} row(s) skipped")
