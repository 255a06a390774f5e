"""``manage.py schedule_worker``: fire due jobs (and run this app's listeners) until SIGTERM or Ctrl-C."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run a schedule_sdk worker: fire due jobs until SIGTERM or Ctrl-C, then stop gracefully."

    # --8<-- [start:handle]
    def handle(self, *args: Any, **options: Any) -> None:
        container = apps.get_app_config("reminders").container  # built in RemindersConfig.ready()
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        worker = container.worker().start()  # reconciles first, then fires in this process
        self.stderr.write(f"schedule worker {container.settings().worker_id} started; Ctrl-C stops it")
        while not stop.wait(0.5):
            pass
        self.stderr.write("stopping: in-flight fires finish or are released to other workers")
        worker.stop()
        container.shutdown_resources()

    # --8<-- [end:handle]
