"""Create an agent token; the key is printed once, as the last word of the output."""

from django.core.management.base import BaseCommand

from inventory.services import agent_token_create


class Command(BaseCommand):
    help = "Create an agent token (one per server). The key is shown once; store it on the server."

    def add_arguments(self, parser):
        parser.add_argument("name", nargs="?", default="", help="a label, e.g. the server's name")

    def handle(self, *args, name: str = "", **options):
        token, key = agent_token_create(name=name)
        label = f" for {name}" if name else ""
        self.stdout.write(f"Agent token {token.pk}{label} (shown once): {key}")
