"""Counting a cron's fires in a window from its fields gives what enumerating them gives, in
every zone and window it accepts; across a DST change it declines (the caller enumerates)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from schedule_sdk.domain import timing

EXPRESSIONS = [
    "* * * * *",
    "*/5 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "15,45 9-17 * * 1-5",
    "0 0 1,15 * *",
    "0 12 13 * 5",  # day-of-month or Friday
    "0 6 * 2 *",
    "59 23 31 * *",
]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"]


def test_the_count_from_the_fields_is_the_enumerated_count() -> None:
    rng = random.Random(7)
    declined = compared = 0
    for _ in range(120):
        expression, zone = rng.choice(EXPRESSIONS), rng.choice(ZONES)
        after = datetime(2030, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(365 * 86_400))
        until = after + timedelta(seconds=rng.randrange(1, 4 * 86_400))
        counted = timing.count_cron_fires(expression, zone, after, until)
        enumerated = len(timing.cron_instants(expression, zone, after, until, 100_000))
        if counted is None:
            declined += 1
            continue
        compared += 1
        assert counted == enumerated, (expression, zone, after, until)
    assert compared > 80 and declined > 0


def test_it_declines_a_window_with_a_dst_change_and_one_too_long() -> None:
    spring = datetime(2030, 3, 30, 12, tzinfo=UTC)  # Berlin springs forward on the 31st
    assert timing.count_cron_fires("30 2 * * *", "Europe/Berlin", spring, spring + timedelta(days=1)) is None
    assert timing.count_cron_fires("30 2 * * *", "UTC", spring, spring + timedelta(days=1)) == 1
    assert timing.count_cron_fires("* * * * *", "UTC", spring, spring + timedelta(days=40)) is None
    assert timing.count_cron_fires("* * * * *", "UTC", spring, spring) == 0


def test_a_reads_count_across_dst_changes_is_the_enumerated_count() -> None:
    from schedule_sdk.core.upcoming import CronCounts

    start = datetime(2030, 3, 20, 7, 3, 5, tzinfo=UTC)  # Berlin springs forward on the 31st
    for expression in ("* * * * *", "30 2 * * *", "*/7 1-3 * * *"):
        for days in (1, 15, 45):
            until = start + timedelta(days=days)
            enumerated = len(timing.cron_instants(expression, "Europe/Berlin", start, until, 10**6))
            assert CronCounts()._count(expression, "Europe/Berlin", start, until) == enumerated
    autumn = datetime(2030, 10, 26, 12, tzinfo=UTC)  # and falls back on the 27th: 02:xx twice
    until = autumn + timedelta(days=2)
    enumerated = len(timing.cron_instants("*/10 * * * *", "Europe/Berlin", autumn, until, 10**6))
    assert CronCounts()._count("*/10 * * * *", "Europe/Berlin", autumn, until) == enumerated
