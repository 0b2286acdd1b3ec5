"""Create an enrollment token; the key is printed once, as the last word of the output."""

from django.core.management.base import BaseCommand, CommandError

from inventory.services import enrollment_token_create, parse_duration


class Command(BaseCommand):
    help = (
        "Create an enrollment token: one secret that up to --uses agents present once each "
        "to get their own agent token. The key is shown once."
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", default="", help="a label, e.g. the rollout's name")
        parser.add_argument(
            "--uses", type=int, default=1, metavar="N", help="enrollments allowed (default 1)"
        )
        parser.add_argument(
            "--expires",
            default="7d",
            metavar="DURATION",
            help="30m, 12h, 7d, 2w, or 'never' (default 7d)",
        )
        parser.add_argument(
            "--allow-reenroll",
            action="store_true",
            help="may replace a server's live agent token (reinstalled servers)",
        )

    def handle(self, *args, name: str, uses: int, expires: str, allow_reenroll: bool, **options):
        try:
            expires_in = None if expires == "never" else parse_duration(expires)
            token, key = enrollment_token_create(
                name=name, uses=uses, expires_in=expires_in, allow_reenroll=allow_reenroll
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        until = f"until {token.expires_at:%Y-%m-%d %H:%M %Z}" if token.expires_at else "no expiry"
        label = f" {name}" if name else ""
        self.stdout.write(
            f"Enrollment token {token.pk}{label} ({uses} use(s), {until}; shown once): {key}"
        )
