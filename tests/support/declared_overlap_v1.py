"""An app declaring ``app.export`` every hour, without an overlap policy (see
``declared_overlap_v2``, the same with ``overlap="skip"``)."""

from __future__ import annotations

from datetime import timedelta

from schedule_sdk import ScheduleArrivedEvent, every


@every(timedelta(hours=1), name="app.export")
def export(event: ScheduleArrivedEvent) -> None:
    """Never fires in the tests (an hour away)."""
