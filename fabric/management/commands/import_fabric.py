"""Import a saved ibnetdiscover output (plain or -p) for a fabric, with its node-name map."""

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from fabric.services import FabricRejected, fabric_import


def _read(file: str) -> bytes:
    if file == "-":
        return sys.stdin.buffer.read()
    path = Path(file)
    if not path.is_file():
        raise CommandError(f"no such file: {file}")
    return path.read_bytes()


class Command(BaseCommand):
    help = (
        "Import a saved ibnetdiscover output for a fabric (format detected); a capture or "
        "map that cannot be read changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="the fabric's name; created when new")
        parser.add_argument("file", help="the saved output, or - for standard input")
        parser.add_argument(
            "--node-name-map", dest="node_name_map", help="ibnetdiscover's node-name map file"
        )

    def handle(self, *args, name: str, file: str, node_name_map: str | None, **options):
        raw = _read(file)
        names_raw = _read(node_name_map) if node_name_map else None
        try:
            result, names = fabric_import(fabric_name=name, raw=raw, node_name_map=names_raw)
        except FabricRejected as exc:
            where = f"{node_name_map}: " if exc.field == "node_name_map" else ""
            raise CommandError(f"{where}{exc}") from None
        if names is not None:
            self.stdout.write(f"{names.fabric}: node-name map of {names.entries} names")
        self.stdout.write(
            f"{result.fabric}: {result.format}, {result.switches} switches, {result.adapters} "
            f"adapters, {result.links_up} cables up, {result.ports_down} ports down; "
            f"{result.added} new, {result.gone} gone; {result.unbound} server NICs unbound"
        )
