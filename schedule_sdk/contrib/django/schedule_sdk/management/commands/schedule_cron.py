"""``manage.py schedule_cron EXPR --tz ZONE``: the next fire times of a cron expression in a zone
(``schedule-sdk cron``, inside the Django project)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from schedule_sdk.entrypoints.cli import main


class Command(BaseCommand):
    help = "Print the next fire times of a cron expression in a time zone, DST changes marked."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("expression", help='a 5-field cron expression, e.g. "30 2 * * *"')
        parser.add_argument("--tz", required=True, help="IANA time zone, e.g. Europe/Berlin")
        parser.add_argument("-n", type=int, default=10, help="how many fire times, 1-1000 (default 10)")
        parser.add_argument("--after", help="start after this ISO 8601 time with an offset (default: now)")
        parser.add_argument("--json", action="store_true", help="print a JSON list of fire times")

    def handle(self, *args: Any, **options: Any) -> None:
        argv = ["cron", options["expression"], "--tz", options["tz"], "-n", str(options["n"])]
        if options.get("after"):
            argv += ["--after", options["after"]]
        if options.get("json"):
            argv.append("--json")
        code = main(argv, out=self.stdout, err=self.stderr)
        if code:
            raise CommandError(f"schedule_cron failed (exit {code})", returncode=code)
