"""``SystemClock``: the real wall clock, aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime

from ..ports import Clock


class SystemClock(Clock):
    def now(self) -> datetime:
        return datetime.now(UTC)
