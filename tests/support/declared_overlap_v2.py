"""``declared_overlap_v1``'s ``app.export`` with ``overlap="skip"``."""

from __future__ import annotations

from datetime import timedelta

from schedule_sdk import ScheduleArrivedEvent, every


@every(timedelta(hours=1), name="app.export", overlap="skip")
def export(event: ScheduleArrivedEvent) -> None:
    """Never fires in the tests (an hour away)."""
