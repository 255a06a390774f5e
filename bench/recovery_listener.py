"""Listener module for bench/recovery.py worker processes: appends ``job_id scheduled_for
fired_at`` (epoch seconds) per event to ``$RECOVERY_BENCH_EVENTS`` (one ``write`` per event, O_APPEND)."""

from __future__ import annotations

import os

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, ScheduleArrivedEvent, on_event

_fd = os.open(os.environ["RECOVERY_BENCH_EVENTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


@on_event(SCHEDULE_ARRIVED_EVENT)
def record(event: ScheduleArrivedEvent) -> None:
    line = f"{event.scheduled_job_id} {event.scheduled_for.timestamp()} {event.fired_at.timestamp()}\n"
    os.write(_fd, line.encode())
