"""schedule_sdk.domain.timing: zones, cron in wall-clock time with Vixie DST rules, intervals."""

from __future__ import annotations

import re
from datetime import UTC as STDLIB_UTC
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from schedule_sdk import CronRepeat, IntervalRepeat
from schedule_sdk.domain.errors import (
    InvalidCron,
    InvalidInterval,
    InvalidTimezone,
    NaiveDatetime,
    ScheduleValidationError,
)
from schedule_sdk.domain.timing import (
    UTC,
    cron_fire_times,
    ensure_aware,
    interval_fire_times,
    is_wildcard_cron,
    next_cron_time,
    next_interval_time,
    parse_cron,
    validate_cron,
    validate_interval,
    wall_instant,
    zone,
)

US = timedelta(microseconds=1)


def iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


def at(day: str, offset: str, hours: range | tuple[int, ...], minutes: tuple[int, ...] = (0,)) -> list[str]:
    """Wall times ``day Thh:mm`` with a fixed UTC offset, as ISO strings."""
    return [f"{day}T{h:02}:{m:02}{offset}" for h in hours for m in minutes]


def occurrences(expression: str, tz: str, start: str, end: str) -> list[str]:
    """Every occurrence in [start, end), rendered in the zone with its real offset."""
    limit, moment = iso(end), iso(start) - US
    found: list[datetime] = []
    for _ in range(1000):
        moment = next_cron_time(expression, tz, moment)
        assert moment.tzinfo is UTC
        if moment >= limit:
            return [t.astimezone(ZoneInfo(tz)).isoformat(timespec="minutes") for t in found]
        found.append(moment)
    raise AssertionError("too many occurrences")


# --- DST transition days (2026), full sequences over the local day ----------------------------

NY_SPRING = ("America/New_York", "2026-03-08T00:00-05:00", "2026-03-09T00:00-04:00")
NY_FALL = ("America/New_York", "2026-11-01T00:00-04:00", "2026-11-02T00:00-05:00")
BERLIN_SPRING = ("Europe/Berlin", "2026-03-29T00:00+01:00", "2026-03-30T00:00+02:00")
BERLIN_FALL = ("Europe/Berlin", "2026-10-25T00:00+02:00", "2026-10-26T00:00+01:00")
QUARTERS = (0, 15, 30, 45)

NY_S, NY_F, BE_S, BE_F = "2026-03-08", "2026-11-01", "2026-03-29", "2026-10-25"

TRANSITION_CASES = [
    # America/New_York, spring forward: 02:00 EST -> 03:00 EDT (02:xx does not exist)
    (NY_SPRING, "30 2 * * *", [f"{NY_S}T03:00-04:00"]),
    (NY_SPRING, "30 1 * * *", [f"{NY_S}T01:30-05:00"]),
    (NY_SPRING, "0 2 * * *", [f"{NY_S}T03:00-04:00"]),
    (NY_SPRING, "0,30 2 * * *", [f"{NY_S}T03:00-04:00"]),  # both in the gap: fires once
    (NY_SPRING, "30 1-3 * * *", [f"{NY_S}T01:30-05:00", f"{NY_S}T03:00-04:00", f"{NY_S}T03:30-04:00"]),
    (NY_SPRING, "0 * * * *", at(NY_S, "-05:00", range(0, 2)) + at(NY_S, "-04:00", range(3, 24))),
    (NY_SPRING, "*/20 2 * * *", []),
    (
        NY_SPRING,
        "*/15 * * * *",
        at(NY_S, "-05:00", range(0, 2), QUARTERS) + at(NY_S, "-04:00", range(3, 24), QUARTERS),
    ),
    # America/New_York, fall back: 02:00 EDT -> 01:00 EST (01:xx happens twice)
    (NY_FALL, "30 2 * * *", [f"{NY_F}T02:30-05:00"]),
    (NY_FALL, "30 1 * * *", [f"{NY_F}T01:30-04:00"]),  # first pass only
    (NY_FALL, "0 2 * * *", [f"{NY_F}T02:00-05:00"]),
    (NY_FALL, "0,30 2 * * *", [f"{NY_F}T02:00-05:00", f"{NY_F}T02:30-05:00"]),
    (NY_FALL, "30 1-3 * * *", [f"{NY_F}T01:30-04:00", f"{NY_F}T02:30-05:00", f"{NY_F}T03:30-05:00"]),
    (NY_FALL, "0 * * * *", at(NY_F, "-04:00", range(0, 2)) + at(NY_F, "-05:00", range(1, 24))),
    (NY_FALL, "*/20 2 * * *", at(NY_F, "-05:00", (2,), (0, 20, 40))),
    (
        NY_FALL,
        "*/15 * * * *",
        at(NY_F, "-04:00", range(0, 2), QUARTERS) + at(NY_F, "-05:00", range(1, 24), QUARTERS),
    ),
    # Europe/Berlin, spring forward: 02:00 CET -> 03:00 CEST
    (BERLIN_SPRING, "30 2 * * *", [f"{BE_S}T03:00+02:00"]),
    (BERLIN_SPRING, "30 1 * * *", [f"{BE_S}T01:30+01:00"]),
    (BERLIN_SPRING, "0 2 * * *", [f"{BE_S}T03:00+02:00"]),
    (BERLIN_SPRING, "0,30 2 * * *", [f"{BE_S}T03:00+02:00"]),
    (BERLIN_SPRING, "30 1-3 * * *", [f"{BE_S}T01:30+01:00", f"{BE_S}T03:00+02:00", f"{BE_S}T03:30+02:00"]),
    (BERLIN_SPRING, "0 * * * *", at(BE_S, "+01:00", range(0, 2)) + at(BE_S, "+02:00", range(3, 24))),
    (BERLIN_SPRING, "*/20 2 * * *", []),
    (
        BERLIN_SPRING,
        "*/15 * * * *",
        at(BE_S, "+01:00", range(0, 2), QUARTERS) + at(BE_S, "+02:00", range(3, 24), QUARTERS),
    ),
    # Europe/Berlin, fall back: 03:00 CEST -> 02:00 CET (02:xx happens twice)
    (BERLIN_FALL, "30 2 * * *", [f"{BE_F}T02:30+02:00"]),
    (BERLIN_FALL, "30 1 * * *", [f"{BE_F}T01:30+02:00"]),
    (BERLIN_FALL, "0 2 * * *", [f"{BE_F}T02:00+02:00"]),
    (BERLIN_FALL, "0,30 2 * * *", [f"{BE_F}T02:00+02:00", f"{BE_F}T02:30+02:00"]),
    (BERLIN_FALL, "30 1-3 * * *", [f"{BE_F}T01:30+02:00", f"{BE_F}T02:30+02:00", f"{BE_F}T03:30+01:00"]),
    (BERLIN_FALL, "0 * * * *", at(BE_F, "+02:00", range(0, 3)) + at(BE_F, "+01:00", range(2, 24))),
    (
        BERLIN_FALL,
        "*/20 2 * * *",
        at(BE_F, "+02:00", (2,), (0, 20, 40)) + at(BE_F, "+01:00", (2,), (0, 20, 40)),
    ),
    (
        BERLIN_FALL,
        "*/15 * * * *",
        at(BE_F, "+02:00", range(0, 3), QUARTERS) + at(BE_F, "+01:00", range(2, 24), QUARTERS),
    ),
]


@pytest.mark.parametrize(("day", "expression", "expected"), TRANSITION_CASES)
def test_transition_day_sequences(day: tuple[str, str, str], expression: str, expected: list[str]) -> None:
    tz, start, end = day
    assert occurrences(expression, tz, start, end) == expected


@pytest.mark.parametrize(("day", "expression", "expected"), TRANSITION_CASES)
def test_any_after_gives_the_next_occurrence_of_the_day(
    day: tuple[str, str, str], expression: str, expected: list[str]
) -> None:
    tz, start, end = day
    instants = [iso(s) for s in expected] + [next_cron_time(expression, tz, iso(end) - US)]
    moment = iso(start) - timedelta(seconds=1)
    while moment < iso(end):
        assert next_cron_time(expression, tz, moment) == min(t for t in instants if t > moment), moment
        moment += timedelta(minutes=7, seconds=13)


@pytest.mark.parametrize(
    ("expression", "tz", "after", "expected_utc"),
    [
        ("30 2 * * *", "America/New_York", "2026-03-08T00:00-05:00", "2026-03-08T07:00+00:00"),
        ("30 2 * * *", "Europe/Berlin", "2026-03-29T00:00+01:00", "2026-03-29T01:00+00:00"),
        ("30 1 * * *", "America/New_York", "2026-11-01T00:00-04:00", "2026-11-01T05:30+00:00"),
        # fixed time, after its first pass but before its second: not fired again
        ("30 1 * * *", "America/New_York", "2026-11-01T01:45-04:00", "2026-11-02T06:30+00:00"),
        ("30 1 * * *", "America/New_York", "2026-11-01T01:15-05:00", "2026-11-02T06:30+00:00"),
        # wildcard, after in the first pass: the second pass of an earlier wall time comes next
        ("15 * * * *", "America/New_York", "2026-11-01T01:45-04:00", "2026-11-01T06:15+00:00"),
        ("0 * * * *", "America/New_York", "2026-11-01T01:00-04:00", "2026-11-01T06:00+00:00"),
    ],
)
def test_single_occurrences_around_transitions(
    expression: str, tz: str, after: str, expected_utc: str
) -> None:
    assert next_cron_time(expression, tz, iso(after)) == iso(expected_utc)


def test_lord_howe_half_hour_shift() -> None:
    tz = "Australia/Lord_Howe"  # +10:30 standard, +11:00 summer
    # fall back 2026-04-05: 02:00 +11:00 -> 01:30 +10:30 (01:30-01:59 twice; 02:xx once)
    assert occurrences("*/15 * * * *", tz, "2026-04-05T01:00+11:00", "2026-04-05T02:30+10:30") == [
        "2026-04-05T01:00+11:00",
        "2026-04-05T01:15+11:00",
        "2026-04-05T01:30+11:00",
        "2026-04-05T01:45+11:00",
        "2026-04-05T01:30+10:30",
        "2026-04-05T01:45+10:30",
        "2026-04-05T02:00+10:30",
        "2026-04-05T02:15+10:30",
    ]
    assert occurrences("45 1 * * *", tz, "2026-04-05T00:00+11:00", "2026-04-06T00:00+10:30") == [
        "2026-04-05T01:45+11:00"
    ]
    # spring forward 2026-10-04: 02:00 +10:30 -> 02:30 +11:00
    assert occurrences("*/15 * * * *", tz, "2026-10-04T01:00+10:30", "2026-10-04T03:00+11:00") == [
        "2026-10-04T01:00+10:30",
        "2026-10-04T01:15+10:30",
        "2026-10-04T01:30+10:30",
        "2026-10-04T01:45+10:30",
        "2026-10-04T02:30+11:00",
        "2026-10-04T02:45+11:00",
    ]
    # 02:00 is in the gap (-> transition), 02:30 exists and is the same instant: one fire
    assert occurrences("0,30 2 * * *", tz, "2026-10-04T00:00+10:30", "2026-10-05T00:00+11:00") == [
        "2026-10-04T02:30+11:00"
    ]
    assert next_cron_time("15 2 * * *", tz, iso("2026-10-03T00:00Z")) == iso("2026-10-03T15:30Z")


@pytest.mark.parametrize(
    ("expression", "tz", "after", "expected_utc"),
    [
        # Kathmandu moved from +05:30 to +05:45 at 1986-01-01 00:00: a 15-minute gap
        ("5 0 1 1 *", "Asia/Kathmandu", "1985-12-01T00:00Z", "1985-12-31T18:30Z"),
        ("0 9 * * *", "Asia/Kathmandu", "2026-06-01T00:00Z", "2026-06-01T03:15Z"),
        # Amsterdam summer time moved from +01:19:32 to +01:20 on 1937-07-01: an odd-second transition
        ("0 0 1 7 *", "Europe/Amsterdam", "1937-06-01T00:00Z", "1937-06-30T22:40:28Z"),
    ],
)
def test_non_hour_offsets_and_exact_transition_instant(
    expression: str, tz: str, after: str, expected_utc: str
) -> None:
    assert next_cron_time(expression, tz, iso(after)) == iso(expected_utc)


# --- ordinary cron -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "tz", "after", "expected_utc"),
    [
        ("0 9 * * *", "America/New_York", "2026-06-15T08:00-04:00", "2026-06-15T13:00Z"),
        ("0 9 * * *", "America/New_York", "2026-06-15T09:00-04:00", "2026-06-16T13:00Z"),  # strictly after
        ("0 9 * * *", "America/New_York", "2026-06-15T08:59:59.999999-04:00", "2026-06-15T13:00Z"),
        ("0 9 * * 1-5", "America/New_York", "2026-06-12T10:00-04:00", "2026-06-15T13:00Z"),  # Fri -> Mon
        ("0 9 * * MON-FRI", "America/New_York", "2026-06-13T10:00-04:00", "2026-06-15T13:00Z"),
        ("0 9 * * sat,SUN", "Europe/Berlin", "2026-06-15T10:00+02:00", "2026-06-20T07:00Z"),
        ("0 0 1 JAN *", "UTC", "2026-06-15T00:00Z", "2027-01-01T00:00Z"),
        ("*/15 * * * *", "UTC", "2026-06-15T10:07:30Z", "2026-06-15T10:15Z"),
        ("0 0 29 2 *", "UTC", "2026-03-01T00:00Z", "2028-02-29T00:00Z"),
        ("0 0 29 2 *", "America/New_York", "2026-03-01T00:00Z", "2028-02-29T05:00Z"),
        ("0 0 31 * *", "UTC", "2026-03-31T00:00Z", "2026-05-31T00:00Z"),
        ("@hourly", "UTC", "2026-06-15T10:07Z", "2026-06-15T11:00Z"),
        ("@daily", "Europe/Berlin", "2026-06-15T10:07Z", "2026-06-15T22:00Z"),
        ("@midnight", "UTC", "2026-06-15T10:07Z", "2026-06-16T00:00Z"),
        ("@weekly", "UTC", "2026-06-15T10:07Z", "2026-06-21T00:00Z"),  # Sunday
        ("@monthly", "UTC", "2026-06-15T10:07Z", "2026-07-01T00:00Z"),
        ("@yearly", "UTC", "2026-06-15T10:07Z", "2027-01-01T00:00Z"),
        ("@annually", "UTC", "2026-06-15T10:07Z", "2027-01-01T00:00Z"),
        ("  0   9 * * *  ", "UTC", "2026-06-15T10:00Z", "2026-06-16T09:00Z"),
    ],
)
def test_next_cron_time(expression: str, tz: str, after: str, expected_utc: str) -> None:
    result = next_cron_time(expression, tz, iso(after))
    assert result == iso(expected_utc)
    assert result.tzinfo is UTC


def test_next_cron_time_accepts_a_zoneinfo_and_any_aware_after() -> None:
    after = datetime(2026, 6, 15, 10, 0, tzinfo=timezone(timedelta(hours=5)))
    expected = iso("2026-06-15T13:00Z")
    assert next_cron_time("0 9 * * *", ZoneInfo("America/New_York"), after) == expected
    assert next_cron_time("0 9 * * *", zone("America/New_York"), after) == expected


def test_next_cron_time_rejects_bad_input() -> None:
    with pytest.raises(NaiveDatetime, match="after"):
        next_cron_time("0 9 * * *", "UTC", datetime(2026, 1, 1))
    with pytest.raises(InvalidTimezone):
        next_cron_time("0 9 * * *", "Mars/Olympus", iso("2026-01-01T00:00Z"))
    with pytest.raises(InvalidCron):
        next_cron_time("0 0 30 2 *", "UTC", iso("2026-01-01T00:00Z"))
    with pytest.raises(InvalidCron):
        next_cron_time("61 * * * *", "UTC", iso("2026-01-01T00:00Z"))


@pytest.mark.parametrize(
    "expression",
    [
        "* * *",
        "61 * * * *",
        "0 24 * * *",
        "0 0 0 * *",
        "0 0 30 2 *",  # never matches
        "0 0 31 4 *",  # never matches
        "0 0 * * * *",  # 6 fields (seconds)
        "0 0 1 1 * 2026",  # 6 fields (year)
        "0 0 1 1 * 2026 0",
        "",
        "   ",
        "@reboot",
        "@every 5m",
        "*/0 * * * *",
        "0 0 * FOO *",
        "R * * * *",  # croniter's random field: not deterministic
        "H * * * *",  # croniter's hashed field
        "H(0-29) * * * *",
    ],
)
def test_validate_cron_rejects(expression: str) -> None:
    with pytest.raises(InvalidCron):
        validate_cron(expression)


@pytest.mark.parametrize("value", [None, 5, ["0", "0", "*", "*", "*"], b"0 0 * * *"])
def test_validate_cron_rejects_non_strings(value: object) -> None:
    with pytest.raises(InvalidCron):
        validate_cron(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "expression",
    [
        "* * * * *",
        "0 9 * * 1-5",
        "0 9 * * MON-FRI",
        "0 0 1 JAN,JUL *",
        "0 0 29 2 *",
        "*/15 0-6,18-23 1-15/2 * *",
        "@hourly",
        "@daily",
        "@weekly",
        "@monthly",
        "@yearly",
        "@annually",
        "@midnight",
        "@DAILY",
    ],
)
def test_validate_cron_accepts(expression: str) -> None:
    assert validate_cron(expression) is None  # no error
    start = datetime(2030, 1, 1, tzinfo=UTC)
    assert next_cron_time(expression, "UTC", start) > start  # and the expression runs


@pytest.mark.parametrize(
    ("expression", "wildcard"),
    [
        ("* * * * *", True),
        ("*/15 * * * *", True),
        ("0 * * * *", True),
        ("*/20 2 * * *", True),
        ("* 2 * * *", True),
        ("@hourly", True),
        ("30 2 * * *", False),
        ("0,30 2 * * *", False),
        ("30 1-3 * * *", False),
        ("0-59 0-23 * * *", False),
        ("0 9 * * *", False),
        ("@daily", False),
        ("@weekly", False),
    ],
)
def test_is_wildcard_cron(expression: str, wildcard: bool) -> None:
    assert is_wildcard_cron(expression) is wildcard


# --- the Debian grammar ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "field", "values"),
    [
        ("0 2-2 * * *", "hours", {2}),  # a single-value range is that value, not '*'
        ("0 2-2/1 * * *", "hours", {2}),
        ("0 2-2,5 * * *", "hours", {2, 5}),
        ("5-5 * * * *", "minutes", {5}),
        ("0 9 * * 1-1", "weekdays", {1}),
        ("*/15 * * * *", "minutes", {0, 15, 30, 45}),
        ("10-30/10 * * * *", "minutes", {10, 20, 30}),
        ("*/100 * * * *", "minutes", {0}),  # a step larger than the field keeps the first value
        ("0 0 * * 7", "weekdays", {0}),  # 7 is Sunday, like 0
        ("0 0 * * 5-7", "weekdays", {5, 6, 0}),
        ("0 0 * * */2", "weekdays", {0, 2, 4, 6}),  # 0-7/2: 0, 2, 4, 6 (7 is not reached)
        ("0 0 * * MON-fri", "weekdays", {1, 2, 3, 4, 5}),
        ("0 0 * * Sun,sat", "weekdays", {0, 6}),
        ("0 0 1 jan-MAR,Dec *", "months", {1, 2, 3, 12}),
        ("0 0 */10 * *", "days", {1, 11, 21, 31}),
        ("00,05 09 * * *", "minutes", {0, 5}),
    ],
)
def test_parse_cron_expands_fields_as_debian_does(expression: str, field: str, values: set[int]) -> None:
    assert getattr(parse_cron(expression), field) == values


def test_a_rare_expression_always_finds_its_next_occurrence() -> None:
    # 29 February on a Sunday (the day fields are ANDed): 2032, 2060, 2088, 2128 (2100 is not leap)
    validate_cron("0 0 29 2 */7")
    moment, found = iso("2026-06-01T00:00Z"), []
    for _ in range(4):
        moment = next_cron_time("0 0 29 2 */7", "UTC", moment)
        found.append(moment.year)
    assert found == [2032, 2060, 2088, 2128]
    # a date that never exists is still refused
    with pytest.raises(InvalidCron, match="never matches"):
        validate_cron("0 0 31 11 */7")


@pytest.mark.parametrize(
    ("expression", "day_or"),
    [
        ("0 9 1 * 1", True),
        ("0 9 1-1 * 1-5", True),
        ("0 9 */3 * 1", False),  # a day field begins with '*': both must match
        ("0 9 1 * */7", False),
        ("0 9 * * 1", False),
        ("0 9 1 * *", False),
        ("@weekly", False),
    ],
)
def test_parse_cron_day_or(expression: str, day_or: bool) -> None:
    assert parse_cron(expression).day_or is day_or


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("0 0 L * *", "'L' is not a value"),
        ("0 0 15W * *", "'15W' is not a value"),
        ("0 0 LW * *", "'LW' is not a value"),
        ("0 0 * * 5L", "'5L' is not a value"),
        ("0 0 * * 1#2", "invalid day-of-week field"),
        ("0 0 ? * *", "invalid day-of-month field"),
        ("0 0 * * ?", "invalid day-of-week field"),
        ("0 22-2 * * *", "wrap-around range '22-2'"),
        ("0 0 * * fri-mon", "wrap-around range 'fri-mon'"),
        ("0 0 * * mon-sun", "wrap-around range 'mon-sun'"),  # 'sun' is 0, as in Debian
        ("0 0 1 dec-jan *", "wrap-around range"),
        ("5/15 * * * *", "a step needs a range or '*'"),
        ("0 0 * * 1/2", "a step needs a range or '*'"),
        ("0-30/0 * * * *", "step '0'"),
        ("*/x * * * *", "step 'x'"),
        ("1-2-3 * * * *", "invalid minute field"),
        ("1,,2 * * * *", "invalid minute field"),
        ("-1 * * * *", "invalid minute field"),
        ("jan * * * *", "'jan' is not a value from 0 to 59"),
        ("0 0 * mon *", "'mon' is not a value from 1 to 12"),
        ("0 0 * * 8", "'8' is not a value from 0 to 7"),
        ("0 0 32 * *", "'32' is not a value from 1 to 31"),
        ("0 0 1 13 *", "'13' is not a value from 1 to 12"),
        ("0 0 * * monday", "'monday' is not a value"),
        ("0 0 * * ٣", "invalid day-of-week field"),  # only ASCII digits
    ],
)
def test_parse_cron_refuses_syntax_beyond_vixie_cron(expression: str, reason: str) -> None:
    with pytest.raises(InvalidCron, match=re.escape(reason)) as refused:
        parse_cron(expression)
    assert refused.value.code == "SCHEDULE_INVALID_CRON"
    with pytest.raises(InvalidCron):
        validate_cron(expression)


# --- preview ----------------------------------------------------------------------------------------


def fires(expression: str, tz: str, after: str, n: int) -> list[tuple[str, str | None]]:
    return [
        (f.local.isoformat(timespec="minutes"), f.mark)
        for f in cron_fire_times(expression, tz, iso(after), n)
    ]


def test_cron_fire_times_marks_what_a_dst_change_did() -> None:
    assert fires("30 2 * * *", "America/New_York", "2026-03-08T00:00Z", 2) == [
        ("2026-03-08T03:00-04:00", "moved"),
        ("2026-03-09T02:30-04:00", None),
    ]
    assert fires("0,30 2 * * *", "America/New_York", "2026-03-08T00:00Z", 2) == [
        ("2026-03-08T03:00-04:00", "merged"),
        ("2026-03-09T02:00-04:00", None),
    ]
    # Lord Howe: 02:00 is moved to the transition, where 02:30 (which exists) also fires: merged
    assert fires("0,30 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00Z", 1) == [
        ("2026-10-04T02:30+11:00", "merged")
    ]
    assert fires("0 1 * * *", "America/New_York", "2026-11-01T00:00Z", 2) == [
        ("2026-11-01T01:00-04:00", None),
        ("2026-11-02T01:00-05:00", None),
    ]
    assert fires("30 * * * *", "America/New_York", "2026-11-01T05:00Z", 3) == [
        ("2026-11-01T01:30-04:00", None),
        ("2026-11-01T01:30-05:00", "repeated"),
        ("2026-11-01T02:30-05:00", None),
    ]


def test_cron_fire_times_are_the_next_cron_times_in_turn() -> None:
    tz, moment = "Europe/Berlin", iso("2026-10-24T12:00Z")
    listed = cron_fire_times("*/20 1-3 * * *", tz, moment, 40)
    for fire in listed:
        moment = next_cron_time("*/20 1-3 * * *", tz, moment)
        assert fire.at == moment and fire.at.tzinfo is UTC
        assert (
            fire.local == moment.astimezone(ZoneInfo(tz))
            and fire.local.fold == moment.astimezone(ZoneInfo(tz)).fold
        )
    assert len(listed) == 40


def test_fire_time_to_dict() -> None:
    (fire,) = cron_fire_times("30 2 * * *", "America/New_York", iso("2026-03-08T00:00Z"), 1)
    assert fire.to_dict() == {
        "at": "2026-03-08T07:00:00+00:00",
        "local": "2026-03-08T03:00:00-04:00",
        "mark": "moved",
        "scheduled": ["2026-03-08T02:30:00"],
        "nominal": None,
        "excluded": False,
    }


def test_interval_fire_times_are_fixed_rate() -> None:
    listed = interval_fire_times(
        iso("2026-03-08T06:00Z"), 3_600_000, iso("2026-03-08T05:30Z"), 3, "America/New_York"
    )
    assert [f.local.isoformat(timespec="minutes") for f in listed] == [
        "2026-03-08T01:00-05:00",
        "2026-03-08T03:00-04:00",  # real hours: the wall clock skips 02:00
        "2026-03-08T04:00-04:00",
    ]
    assert [f.mark for f in listed] == [None, None, None]
    # near the end of the calendar the list stops short instead of overflowing
    assert len(interval_fire_times(iso("9999-12-30T00:00Z"), 86_400_000, iso("9999-12-30T00:00Z"), 5)) == 1


@pytest.mark.parametrize("n", [0, -1, 1001, True, 2.0, "3", None])
def test_fire_time_counts_are_checked(n: object) -> None:
    with pytest.raises(ScheduleValidationError, match="n must be"):
        cron_fire_times("* * * * *", "UTC", iso("2026-01-01T00:00Z"), n)  # type: ignore[arg-type]
    with pytest.raises(ScheduleValidationError, match="n must be"):
        interval_fire_times(iso("2026-01-01T00:00Z"), 1000, iso("2026-01-01T00:00Z"), n)  # type: ignore[arg-type]


def test_repeats_preview_their_fire_times() -> None:
    after = iso("2026-03-07T12:00Z")
    cron = CronRepeat(expression="30 2 * * *")
    assert [f.at for f in cron.next_fire_times(after, 2, timezone="America/New_York")] == [
        iso("2026-03-08T07:00Z"),
        iso("2026-03-09T06:30Z"),
    ]
    zoned = CronRepeat(expression="30 2 * * *", timezone="Europe/Berlin")
    assert zoned.next_fire_times(after, 1, timezone="America/New_York")[0].at == iso("2026-03-08T01:30Z")
    with pytest.raises(InvalidTimezone):
        cron.next_fire_times(after)
    every = IntervalRepeat(every_ms=60_000)
    assert [f.at for f in every.next_fire_times(after, 2)] == [
        iso("2026-03-07T12:01Z"),
        iso("2026-03-07T12:02Z"),
    ]
    anchored = every.next_fire_times(after, 1, anchor=iso("2026-03-07T11:59:30Z"), timezone="Asia/Tokyo")
    assert anchored[0].at == iso("2026-03-07T12:00:30Z") and anchored[0].local.utcoffset() == timedelta(
        hours=9
    )


# --- property-style: 2 years of occurrences -----------------------------------------------------


@pytest.mark.parametrize(
    "tz",
    [
        "America/New_York",
        "Europe/Berlin",
        "Australia/Lord_Howe",
        "America/Santiago",
        "Antarctica/Troll",
        "UTC",
    ],
)
@pytest.mark.parametrize("expression", ["30 2 * * *", "*/20 2 * * *", "30 0-3 * * 0"])
def test_two_years_strictly_increasing_and_consistent(tz: str, expression: str) -> None:
    moment, end, count = iso("2025-06-01T00:00Z"), iso("2027-06-01T00:00Z"), 0
    while moment < end:
        result = next_cron_time(expression, tz, moment)
        assert result > moment
        assert next_cron_time(expression, tz, result - US) == result
        moment, count = result, count + 1
    assert count > 100


# --- zones and datetimes --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["UTC", "America/New_York", "Europe/Berlin", "Etc/GMT+5", "Asia/Kathmandu"])
def test_zone_valid(name: str) -> None:
    tz = zone(name)
    assert isinstance(tz, ZoneInfo)
    assert tz.key == name
    assert zone(name) is tz


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Mars/Olympus",
        "../etc/passwd",
        "/etc/localtime",
        "America/../../etc/passwd",
        "America/New_York ",
        # Lowercase is refused on every platform (ZoneInfo alone would accept it on a
        # case-insensitive file system); names must be spelled as in the tz database.
        "utc",
        "america/new_york",
        "localtime",  # host-dependent, not an IANA name
        "posixrules",
        "zone.tab",
        None,
        5,
    ],
)
def test_zone_invalid(name: object) -> None:
    with pytest.raises(InvalidTimezone):
        zone(name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("Europe/Pari", "Europe/Paris"),
        ("europe/paris", "Europe/Paris"),
        ("utc", "UTC"),
        ("America/New York", "America/New_York"),
        ("America/New_York ", "America/New_York"),
        ("US/Pacfic", "US/Pacific"),
    ],
)
def test_a_misspelled_zone_gets_the_closest_name(name: str, meant: str) -> None:
    with pytest.raises(InvalidTimezone) as refused:
        zone(name)
    assert str(refused.value).endswith(f"(did you mean {meant!r}?)")


@pytest.mark.parametrize("name", ["Mars/Olympus", "x" * 500, "", None])
def test_a_zone_like_no_other_gets_no_suggestion(name: object) -> None:
    with pytest.raises(InvalidTimezone) as refused:
        zone(name)  # type: ignore[arg-type]
    assert "did you mean" not in str(refused.value)


def test_ensure_aware_converts_to_utc() -> None:
    value = datetime(2026, 6, 15, 9, 0, tzinfo=ZoneInfo("America/New_York"))
    result = ensure_aware(value)
    assert result == iso("2026-06-15T13:00Z")
    assert result.tzinfo is UTC
    # the second pass of an ambiguous wall time keeps its own instant
    second = datetime(2026, 11, 1, 1, 30, fold=1, tzinfo=ZoneInfo("America/New_York"))
    assert ensure_aware(second) == iso("2026-11-01T06:30Z")
    assert UTC is STDLIB_UTC  # the same object as datetime.timezone.utc


@pytest.mark.parametrize("value", [datetime(2026, 1, 1), date(2026, 1, 1), "2026-01-01T00:00Z", None, 0])
def test_ensure_aware_rejects(value: object) -> None:
    with pytest.raises(NaiveDatetime, match="due_at"):
        ensure_aware(value, "due_at")  # type: ignore[arg-type]


def test_ensure_aware_default_field_name() -> None:
    with pytest.raises(NaiveDatetime, match="run_at"):
        ensure_aware(datetime(2026, 1, 1))


# --- intervals ------------------------------------------------------------------------------------


def test_interval_fixed_rate_without_drift() -> None:
    anchor = iso("2026-01-01T00:00:00.000001+02:00")
    moment = anchor
    for _ in range(1_000_000):
        moment = next_interval_time(anchor, 7, moment)
    assert moment == anchor + timedelta(seconds=7000)
    assert moment.tzinfo is UTC
    assert next_interval_time(anchor, 7, anchor + timedelta(seconds=7000) - US) == moment


@pytest.mark.parametrize(
    ("every_ms", "after", "expected"),
    [
        (1000, "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z"),  # after == anchor: the next one
        (1000, "2026-01-01T00:00:00.999999Z", "2026-01-01T00:00:01Z"),
        (1000, "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"),
        (1000, "2025-12-31T23:00:00Z", "2026-01-01T00:00:00Z"),  # after < anchor: the anchor
        (1000, "2025-12-31T23:59:59.999999Z", "2026-01-01T00:00:00Z"),
        (3_600_000, "2026-03-08T12:00:00-04:00", "2026-03-08T17:00:00Z"),  # real time, not wall time
        (86_400_000, "2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z"),
    ],
)
def test_next_interval_time(every_ms: int, after: str, expected: str) -> None:
    assert next_interval_time(iso("2026-01-01T00:00Z"), every_ms, iso(after)) == iso(expected)


def test_next_interval_time_rejects_naive() -> None:
    with pytest.raises(NaiveDatetime, match="anchor"):
        next_interval_time(datetime(2026, 1, 1), 1000, iso("2026-01-01T00:00Z"))
    with pytest.raises(NaiveDatetime, match="after"):
        next_interval_time(iso("2026-01-01T00:00Z"), 1000, datetime(2026, 1, 1))


@pytest.mark.parametrize("every_ms", [1, 7, 86_400_000, 3653 * 86_400_000])
def test_validate_interval_accepts(every_ms: int) -> None:
    assert validate_interval(every_ms) == every_ms


@pytest.mark.parametrize("every_ms", [0, -1, True, False, 1.5, 10.0, "10", None, 3653 * 86_400_000 + 1])
def test_validate_interval_rejects(every_ms: object) -> None:
    with pytest.raises(InvalidInterval):
        validate_interval(every_ms)
    with pytest.raises(InvalidInterval):
        next_interval_time(iso("2026-01-01T00:00Z"), every_ms, iso("2026-01-02T00:00Z"))  # type: ignore[arg-type]


def test_the_status_table_refuses_moves_out_of_a_final_status() -> None:
    import pytest

    from schedule_sdk import InvalidTransition, JobStatus
    from schedule_sdk.domain.status import ALLOWED, check_transition

    for final in (JobStatus.COMPLETED, JobStatus.CANCELLED, JobStatus.FAILED):
        assert ALLOWED[final] == frozenset()
        with pytest.raises(InvalidTransition):
            check_transition(final, JobStatus.PENDING)
    check_transition(JobStatus.ACTIVE, JobStatus.PENDING)  # a retry or the next occurrence
    with pytest.raises(InvalidTransition):
        check_transition(JobStatus.PENDING, JobStatus.COMPLETED)  # only a fire completes a job


@pytest.mark.parametrize(
    ("wall", "zone_name", "instant"),
    [
        (datetime(2026, 7, 1, 12, 0, 30), "Europe/Berlin", datetime(2026, 7, 1, 10, 0, 30, tzinfo=UTC)),
        # skipped by the clock (02:00 -> 03:00): the transition instant
        (datetime(2026, 3, 29, 2, 30), "Europe/Berlin", datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),
        # repeated (03:00 -> 02:00): the first pass
        (datetime(2026, 10, 25, 2, 30), "Europe/Berlin", datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),
        # a whole day skipped (Samoa, 2011-12-30): the transition
        (datetime(2011, 12, 30, 12, 0), "Pacific/Apia", datetime(2011, 12, 30, 10, 0, tzinfo=UTC)),
    ],
)
def test_a_wall_time_names_one_instant_by_the_fixed_time_rule(wall, zone_name, instant):
    assert wall_instant(wall, zone_name) == instant


def test_a_spec_without_timezone_and_a_naive_run_at_are_refused_in_plain_words() -> None:
    import pytest

    from schedule_sdk import CronRepeat, InvalidTimezone, NaiveDatetime, OneShotSpec, RepeatSpec

    with pytest.raises(InvalidTimezone, match=r"OneShotSpec needs timezone=.*timezone='UTC'"):
        OneShotSpec(topic="t", run_at=datetime(2030, 1, 1, tzinfo=UTC))
    with pytest.raises(InvalidTimezone, match="RepeatSpec needs timezone="):
        RepeatSpec(topic="t", repeat=CronRepeat(expression="0 9 * * *"))
    with pytest.raises(NaiveDatetime) as naive:
        OneShotSpec(topic="t", run_at=datetime(2030, 1, 1, 9, 0), timezone="UTC")
    assert "the naive 2030-01-01T09:00:00" in naive.value.message
    assert "datetime.datetime(" not in naive.value.message  # no Python repr
    with pytest.raises(NaiveDatetime, match="got a str$"):
        OneShotSpec(topic="t", run_at="2030-01-01T09:00Z", timezone="UTC")  # type: ignore[arg-type]
