"""The reminders app: builds and wires the schedule_sdk container when Django starts."""

from __future__ import annotations

import atexit
import logging

from django.apps import AppConfig
from django.conf import settings

from schedule_sdk import ScheduleContainer

logger = logging.getLogger(__name__)


# --8<-- [start:ready]
class RemindersConfig(AppConfig):
    name = "reminders"
    container: ScheduleContainer

    def ready(self) -> None:
        self.container = ScheduleContainer()  # connects nothing until first used
        self.container.config.from_dict(settings.SCHEDULE_SDK)
        self.container.listeners().register(f"{self.name}.listeners")  # its @on_event listeners
        self.container.wire(modules=[".views"])
        if settings.SCHEDULE_WORKER_IN_PROCESS:  # development only; see project/settings.py
            worker = self.container.worker().start()
            atexit.register(worker.stop)


# --8<-- [end:ready]
