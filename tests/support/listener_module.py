"""An ``@on_event`` module that two containers bind in the listener isolation tests."""

from __future__ import annotations

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, ScheduleArrivedEvent, on_event

#: Every event this module's listener received, in order (whichever container fired it).
received: list[ScheduleArrivedEvent] = []


@on_event(SCHEDULE_ARRIVED_EVENT)
def record(event: ScheduleArrivedEvent) -> None:
    received.append(event)
