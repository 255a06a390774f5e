"""The library's cron against an independent model of Debian cron's minute loop (cron_model.py).

A quick slice of the random comparison runs here; ``python scripts/cron_model_check.py`` runs
the full one (50,000 cases by default). The model itself is checked first on facts about the
daemon, so that a wrong model cannot silently agree with a wrong library.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.unit.cron_cases import ZONES, check, disagreement, model_fires, transitions, zone
from tests.unit.cron_model import Entry, Refused, daemon_fires


def test_model_parses_like_debian() -> None:
    entry = Entry.parse("5/15,7 2-2,4-10/3 */10 Jan-mar 7")
    assert entry.minutes == {5}  # Debian stops reading a field at a step after a single value
    assert entry.hours == {2, 4, 7, 10}
    assert entry.days == {1, 11, 21, 31}
    assert entry.months == {1, 2, 3}
    assert entry.weekdays == {0, 7}
    assert Entry.parse("0 22-2 * * mon-sun").hours == set()  # a wrap-around range selects nothing
    assert Entry.parse("0 0 * * mon-sun").weekdays == set()  # 'sun' is 0
    assert (Entry.parse("*/5 2 * * *").wildcard, Entry.parse("0 */2 * * *").wildcard) == (True, True)
    assert Entry.parse("0-59 2 * * *").wildcard is False
    assert Entry.parse("0 0 * * 1#2").weekdays == {1}  # the rest of a field after a value is skipped
    for bad in ("60 * * * *", "* * * *", "*/0 * * * *", "0 0 L * *", "0 0 * * 5L"):
        with pytest.raises(Refused):
            Entry.parse(bad)


def test_model_day_fields() -> None:
    def fires(expression: str) -> list[str]:
        after = datetime(2027, 1, 1, 5, tzinfo=UTC)
        minute = int(after.timestamp()) // 60
        found = daemon_fires(
            Entry.parse(expression), zone("UTC"), minute - 60, after, 2, minute + 60 * 24 * 40
        )
        return [f.date().isoformat() for f in found]

    assert fires("0 9 */3 * 1") == ["2027-01-04", "2027-01-25"]  # AND: Mondays on 1, 4, 7, ...
    assert fires("0 9 1 * 1") == ["2027-01-01", "2027-01-04"]  # OR
    assert fires("0 9 1 * *") == ["2027-01-01", "2027-02-01"]


@pytest.mark.parametrize(
    ("expression", "start", "expected"),
    [
        # New York 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z)
        ("30 2 * * *", "2026-03-08T05:00Z", ["2026-03-08T07:00Z", "2026-03-09T06:30Z"]),
        ("0,30 2 * * *", "2026-03-08T05:00Z", ["2026-03-08T07:00Z", "2026-03-09T06:00Z"]),
        ("*/20 2 * * *", "2026-03-08T05:00Z", ["2026-03-09T06:00Z", "2026-03-09T06:20Z"]),
        # New York 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z)
        ("30 1 * * *", "2026-11-01T04:00Z", ["2026-11-01T05:30Z", "2026-11-02T06:30Z"]),
        ("30 * * * *", "2026-11-01T04:00Z", ["2026-11-01T04:30Z", "2026-11-01T05:30Z", "2026-11-01T06:30Z"]),
    ],
)
def test_model_follows_debian_across_new_york_transitions(
    expression: str, start: str, expected: list[str]
) -> None:
    after = datetime.fromisoformat(start)
    minute = int(after.timestamp()) // 60
    found = daemon_fires(
        Entry.parse(expression), zone("America/New_York"), minute - 240, after, len(expected), minute + 3000
    )
    assert [f.isoformat().replace("+00:00", "Z")[:16] + "Z" for f in found] == expected


def test_model_resets_on_three_hour_changes() -> None:
    # Casey +08:00 -> +11:00 at 2009-10-17T18:00Z: 03:30 local never was; no catch-up
    assert model_fires("30 3 * * *", "Antarctica/Casey", datetime(2009, 10, 17, 12, tzinfo=UTC))[
        0
    ] == datetime(2009, 10, 18, 16, 30, tzinfo=UTC)
    # Apia 2011-12-30 never was
    assert model_fires("0 12 30 12 *", "Pacific/Apia", datetime(2011, 12, 29, tzinfo=UTC)) == []


def test_every_zone_has_transitions_to_test() -> None:
    assert len(ZONES) >= 20
    for name in ZONES:
        assert transitions(name), name


def test_library_agrees_with_the_model_on_random_cases_near_transitions() -> None:
    cases, found = check(1000, seed=9)
    assert (cases, found) == (1000, [])


def test_library_agrees_with_the_model_at_the_daemon_thresholds() -> None:
    """A synthetic zone with changes of 4, 5, 179, 180 and 181 minutes, both ways."""
    cases, found = check(200, seed=9, zones=("Test/Thresholds",))
    assert (cases, found) == (200, [])


@pytest.mark.parametrize(
    ("expression", "name", "start"),
    [
        ("0 2-2 * * *", "UTC", "2027-01-01T05:00Z"),
        ("0 9 */3 * 1", "UTC", "2027-01-01T05:00Z"),
        ("0 12 30 12 *", "Pacific/Apia", "2011-12-29T00:00Z"),
        ("30 3 * * *", "Antarctica/Casey", "2009-10-17T12:00Z"),
        ("30 0 * * *", "Antarctica/Casey", "2010-03-04T12:00Z"),
        ("0,30 2 * * *", "America/New_York", "2026-03-08T00:00Z"),
        ("0,30 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00Z"),
        ("*/30 1 * * *", "America/New_York", "2026-11-01T04:00Z"),
    ],
)
def test_library_agrees_with_the_model_on_the_issue_cases(expression: str, name: str, start: str) -> None:
    assert disagreement(expression, name, datetime.fromisoformat(start)) is None
