"""Version 2 of the app of ``declared_v1``: ``app.tick`` every 1.1 s with another payload,
``app.report`` at 10:30, ``app.cleanup`` dropped, ``app.audit`` added, ``app.warmup`` unchanged."""

from __future__ import annotations

from datetime import timedelta

from schedule_sdk import ScheduleArrivedEvent, after, cron, every

received: list[ScheduleArrivedEvent] = []


@every(timedelta(milliseconds=1100), name="app.tick", payload={"v": 2})
def tick(event: ScheduleArrivedEvent) -> None:
    received.append(event)


@cron("30 10 * * 1-5", tz="Europe/Berlin", name="app.report", payload={"v": 2})
def report(event: ScheduleArrivedEvent) -> None:
    received.append(event)


@cron("0 3 * * *", tz="UTC", name="app.audit")
def audit(event: ScheduleArrivedEvent) -> None:
    received.append(event)


@after(timedelta(days=1), name="app.warmup")
def warmup(event: ScheduleArrivedEvent) -> None:
    received.append(event)
