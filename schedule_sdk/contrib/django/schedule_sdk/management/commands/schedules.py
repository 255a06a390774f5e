"""``manage.py schedules plan|apply|list``: the schedules declared in code, on this project's
container (``schedule-sdk schedules``: the same output, ``--json`` and exit codes)."""

from __future__ import annotations

import io
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from schedule_sdk.contrib.django import container
from schedule_sdk.entrypoints.cli import run_in


class Command(BaseCommand):
    help = (
        "Plan, apply or list the schedules declared in code (@cron, @every, @after) in the apps' "
        "schedules modules and SCHEDULE_SDK's listener_modules."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "action",
            choices=("plan", "apply", "list"),
            help="plan: print what a sync would add, change and remove (writes nothing); "
            "apply: sync now and print what it did; list: the declared schedules in the store",
        )
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.add_argument(
            "--listeners", help="comma-separated modules that declare, besides the discovered ones"
        )
        parser.add_argument(
            "--container",
            dest="app_container",
            metavar="MODULE:ATTR",
            help="the app's dependency-injector container, for declared methods",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        argv = ["schedules", options["action"]]
        if options["json"]:
            argv.append("--json")
        if options["action"] != "list":
            if options.get("listeners"):
                argv += ["--listeners", options["listeners"]]
            if options.get("app_container"):
                argv += ["--container", options["app_container"]]
        out, err = io.StringIO(), io.StringIO()
        built = container()
        try:
            code = run_in(built, argv, out=out, err=err)
        finally:
            built.shutdown_resources()
        self.stdout.write(out.getvalue(), ending="")
        self.stderr.write(err.getvalue(), ending="")
        if code:
            raise CommandError(f"schedules {options['action']} failed (exit {code})", returncode=code)
