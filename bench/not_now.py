"""What spread and calendars cost, and how evenly a spread spreads.

    python bench/not_now.py

On the test kit (memory store, inline substrate, fake clock), so the figures are the domain's
own work, not a database's. Prints, each the median of five runs:

- scheduling 10,000 hourly jobs (``schedule_many``) without and with ``spread=1h`` (keyed by
  tenant), in microseconds per job;
- how 10,000 spread hourly jobs fall over the hour's 60 minutes (fewest and most in a minute);
- firing a year of a daily cron (365 fires) without a calendar, with weekdays and a list of dates,
  and with a ``holidays`` calendar (DE-BY), in microseconds per occurrence;
- the calendar check at scheduling at its worst, a refusal: a cron every minute of Sundays
  with Sundays excluded (five years searched, a day at a time, not a minute at a time).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    Calendar,
    CronRepeat,
    HolidaySpec,
    InvalidCalendar,
    ListenerRegistry,
    RepeatSpec,
)
from schedule_sdk.domain.jobs import spread_offset_ms
from schedule_sdk.testing import make_test_kit

T0 = datetime(2027, 1, 1, tzinfo=UTC)
RUNS = 5


def median_seconds(run: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def schedule_hourly(spread: bool) -> None:
    kit = make_test_kit(start=T0)
    options = {"spread": timedelta(hours=1)} if spread else {}
    specs = [
        RepeatSpec(
            topic="bench.digest",
            timezone="UTC",
            repeat=CronRepeat(expression="0 * * * *"),
            spread_key=f"tenant-{n}" if spread else None,
            **options,  # type: ignore[arg-type]
        )
        for n in range(10_000)
    ]
    kit.service.schedule_many(specs)


def fire_a_year(calendar: Calendar | None) -> None:
    registry = ListenerRegistry()
    registry.connect(SCHEDULE_ARRIVED_EVENT, lambda event: None)  # heard: no unheard warnings
    kit = make_test_kit(registry, start=T0)
    spec = RepeatSpec(
        topic="bench.daily",
        timezone="Europe/Berlin",
        repeat=CronRepeat(expression="0 9 * * *"),
        calendar=calendar,
        ends_at=datetime(2028, 1, 1, tzinfo=UTC),
    )
    kit.service.schedule_repeat(spec)
    kit.run_due(until=datetime(2028, 1, 2, tzinfo=UTC))


def worst_calendar_check() -> None:
    kit = make_test_kit(start=T0)
    spec = RepeatSpec(
        topic="bench.minutely",
        timezone="Europe/Berlin",
        repeat=CronRepeat(expression="* * * * 0"),
        calendar=Calendar(weekdays=["sun"], holidays=HolidaySpec(country="DE", subdivision="BY")),
    )
    try:
        kit.service.schedule_repeat(spec)
    except InvalidCalendar:
        return
    raise AssertionError("a calendar that excludes every occurrence was accepted")


def main() -> None:
    plain = median_seconds(lambda: schedule_hourly(False))
    spread = median_seconds(lambda: schedule_hourly(True))
    plain_us, spread_us = plain / 10_000 * 1e6, spread / 10_000 * 1e6
    print(f"schedule 10,000 hourly jobs: {plain_us:.1f} us/job plain, {spread_us:.1f} us/job spread")

    per_minute = [0] * 60
    for n in range(10_000):
        per_minute[spread_offset_ms(f"tenant-{n}", 3_600_000) // 60_000] += 1
    print(f"10,000 spread hourly jobs per minute of the hour: min {min(per_minute)}, max {max(per_minute)}")

    calendars = {
        "none": None,
        "weekdays+dates": Calendar(weekdays=[5, 6], dates=[date(2027, 12, 24), date(2027, 12, 31)]),
        "holidays DE-BY": Calendar(weekdays=[5, 6], holidays=HolidaySpec(country="DE", subdivision="BY")),
    }
    for name, calendar in calendars.items():
        seconds = median_seconds(lambda calendar=calendar: fire_a_year(calendar))  # type: ignore[misc]
        print(f"a year of a daily cron, calendar {name}: {seconds / 365 * 1e6:.0f} us/occurrence")

    check = median_seconds(worst_calendar_check)
    print(f"calendar check refusing every minute of Sundays, Sundays excluded: {check * 1000:.1f} ms")


if __name__ == "__main__":
    main()
