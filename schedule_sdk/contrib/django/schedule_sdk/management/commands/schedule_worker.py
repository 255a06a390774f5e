"""``manage.py schedule_worker``: fire due jobs (and run the listeners) until SIGTERM or Ctrl-C."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from schedule_sdk.contrib.django import container
from schedule_sdk.entrypoints.stopping import StopSignals


class Command(BaseCommand):
    help = "Run a schedule_sdk worker: fire due jobs until SIGTERM or Ctrl-C, then stop gracefully."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--listeners",
            help="comma-separated modules whose @on_event listeners to bind (besides listener_modules)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        built = container()  # built in ScheduleSdkConfig.ready()
        registry = built.listeners()
        for module in filter(None, (m.strip() for m in (options.get("listeners") or "").split(","))):
            registry.register(module)
        with StopSignals() as stop:
            worker = built.worker().start()  # reconciles first, then fires in this process
            self.stderr.write(
                f"schedule worker {built.settings().worker_id} started ({registry.count()} listener(s)); "
                "Ctrl-C stops it"
            )
            stop.wait()
            self.stderr.write("stopping: in-flight fires finish or are released to other workers")
            worker.stop()  # a second signal meanwhile does not cut the stop short
        built.shutdown_resources()
