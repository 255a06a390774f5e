"""Version 1 of an app's declared schedules (``declared_v2`` is its next deploy)."""

from __future__ import annotations

# --8<-- [start:declare]
from datetime import timedelta

from schedule_sdk import ScheduleArrivedEvent, after, cron, every

#: Every event this module's schedules received, in order.
received: list[ScheduleArrivedEvent] = []


@every(timedelta(milliseconds=700), name="app.tick", payload={"v": 1})
def tick(event: ScheduleArrivedEvent) -> None:
    received.append(event)


@cron("0 9 * * 1-5", tz="Europe/Berlin", name="app.report", payload={"v": 1})
def report(event: ScheduleArrivedEvent) -> None:
    received.append(event)


# --8<-- [end:declare]


@every(timedelta(hours=1), name="app.cleanup")
def cleanup(event: ScheduleArrivedEvent) -> None:
    received.append(event)


@after(timedelta(days=1), name="app.warmup")
def warmup(event: ScheduleArrivedEvent) -> None:
    received.append(event)
