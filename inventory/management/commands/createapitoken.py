"""Create a person's API token; the key is printed once, as the last word of the output."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from inventory.services import user_token_create


class Command(BaseCommand):
    help = (
        "Create an API token for a user (Authorization: Token <key>, with that user's "
        "permissions). The key is shown once; only its SHA-256 is stored."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what it is for, e.g. 'snapshot cron'")

    def handle(self, *args, username: str, name: str = "", **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive: its tokens would not work")
        token, key = user_token_create(user=user, name=name)
        label = f" ({name})" if name else ""
        self.stdout.write(f"API token {token.pk} for {username}{label} (shown once): {key}")
