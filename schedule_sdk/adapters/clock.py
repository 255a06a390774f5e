"""``SystemClock``: the real wall clock, aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime

from schedule_sdk.ports import Clock


class SystemClock(Clock):
    def now(self) -> datetime:
        return datetime.now(UTC)

    @property
    def real_time(self) -> bool:
        return True
