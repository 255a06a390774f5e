"""``manage.py schedule_reconcile``: heal the execution substrate from the job store; print the report."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from schedule_sdk.contrib.django import container


class Command(BaseCommand):
    help = "Re-enqueue open jobs the execution substrate has lost and release expired claims."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        built = container()
        try:
            report = built.reconciler().run()
        finally:
            built.shutdown_resources()
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict()))
        else:
            self.stdout.write(" ".join(f"{key}={value}" for key, value in report.as_dict().items()))
