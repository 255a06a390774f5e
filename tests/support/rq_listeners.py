"""A listener module for stock ``rq worker`` processes (``SCHEDULE_LISTENER_MODULES``): appends
``job_id occurrence attempt pid`` per event to ``$SDK_TEST_EVENTS``."""

from __future__ import annotations

import os

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, ScheduleArrivedEvent, on_event


@on_event(SCHEDULE_ARRIVED_EVENT)
def record(event: ScheduleArrivedEvent) -> None:
    line = f"{event.scheduled_job_id} {event.occurrence} {event.attempt} {os.getpid()}\n"
    with open(os.environ["SDK_TEST_EVENTS"], "a", encoding="utf-8") as events:
        events.write(line)
