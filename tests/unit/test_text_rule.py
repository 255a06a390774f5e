"""The one text rule, the JSON limits and how a URL is shown (schedule_sdk.domain.text), and the
domain's refusals of hostile values: typed errors, never an untyped exception."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from schedule_sdk import CronRepeat, IntervalRepeat, JobMetadata, OneShotSpec, RepeatSpec
from schedule_sdk.domain import timing
from schedule_sdk.domain.errors import (
    InvalidCron,
    InvalidDatetime,
    InvalidMetadata,
    InvalidPayload,
)
from schedule_sdk.domain.jobs import MAX_PAYLOAD_DEPTH
from schedule_sdk.domain.text import json_holds_nul, json_too_deep, masked_url, without_secret

SOON = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+psycopg://app:s3cr%40t@db:5432/jobs?x=1",
            "postgresql+psycopg://app:***@db:5432/jobs?x=1",
        ),
        ("redis://:pw@localhost:6379/0", "redis://:***@localhost:6379/0"),
        ("nats://user:pw@nats:4222", "nats://user:***@nats:4222"),
        ("sqlite:///jobs.db", "sqlite:///jobs.db"),
        ("postgresql://app@db/jobs", "postgresql://app@db/jobs"),
        ("http://[::1", "http:<unparsable URL>"),
    ],
)
def test_a_url_is_shown_with_its_password_masked(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_an_error_text_loses_the_password_wherever_it_quotes_it() -> None:
    url = "postgres://app:Hunter2@db/jobs"
    text = f"Could not parse {url!r}; password Hunter2 rejected"
    assert without_secret(text, url) == "Could not parse 'postgres://app:***@db/jobs'; password *** rejected"


def test_json_nesting_is_measured_without_decoding_and_strings_are_skipped() -> None:
    assert not json_too_deep('[[["[[[[[[["]]]', 3)
    assert json_too_deep("[[[[]]]]", 3) and json_too_deep(b"[{[{}]}]", 3)
    assert not json_too_deep(b"[[[[]]]]", 4)
    assert json_too_deep("[" * 100_000, 32)  # a truncated body too


@pytest.mark.parametrize(
    ("value", "holds"),
    [("\x00", True), ("\\u0000", False), ("\\\x00", True), ("a", False), ("\\\\u0000", False)],
)
def test_a_nul_in_encoded_json_is_told_from_an_escaped_backslash(value: str, holds: bool) -> None:
    assert json_holds_nul(json.dumps({"k": value})) is holds


def nested(depth: int) -> dict[str, object]:
    payload: dict[str, object] = {}
    for _ in range(depth - 1):
        payload = {"a": payload}
    return payload


HOSTILE_PAYLOADS: dict[str, Callable[[], dict[str, object]]] = {
    "surrogate": lambda: {"a": "\ud800"},
    "surrogate-key": lambda: {"\udfff": 1},
    "nul": lambda: {"a": ["x\x00"]},
    "nul-key": lambda: {"\x00": 1},
    "too-deep": lambda: nested(MAX_PAYLOAD_DEPTH + 1),
    "recursion": lambda: nested(10_000),  # built in the test: pytest's plugins recurse over params
    "nan": lambda: {"n": float("nan")},
}


@pytest.mark.parametrize("kind", HOSTILE_PAYLOADS)
def test_hostile_payloads_are_invalid_payloads(kind: str) -> None:
    with pytest.raises(InvalidPayload):
        OneShotSpec(topic="t", run_at=SOON, timezone="UTC", payload=HOSTILE_PAYLOADS[kind]())


def test_a_payload_at_the_depth_limit_is_accepted() -> None:
    assert OneShotSpec(topic="t", run_at=SOON, timezone="UTC", payload=nested(MAX_PAYLOAD_DEPTH)).payload


@pytest.mark.parametrize("value", ["a\x00", "\ud800", "x" * 256, ""])
def test_hostile_metadata_is_invalid_metadata(value: str) -> None:
    with pytest.raises(InvalidMetadata):
        JobMetadata(owner_id=value)


@pytest.mark.parametrize(
    "run_at",
    [
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
        datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-5))),
        datetime(9999, 12, 31, 1, tzinfo=UTC),
        datetime(1969, 12, 31, tzinfo=UTC),
    ],
)
def test_instants_that_overflow_or_leave_the_range_are_invalid_datetimes(run_at: datetime) -> None:
    with pytest.raises(InvalidDatetime):
        OneShotSpec(topic="t", run_at=run_at, timezone="UTC")
    with pytest.raises(InvalidDatetime):
        RepeatSpec(topic="t", timezone="UTC", repeat=IntervalRepeat(every_ms=1000), ends_at=run_at)


@pytest.mark.parametrize(
    "wall", [datetime(9999, 12, 31, 23, 59), datetime(1, 1, 1), datetime(9999, 12, 30, 12)]
)
def test_a_wall_time_out_of_range_is_an_invalid_datetime(wall: datetime) -> None:
    with pytest.raises(InvalidDatetime):
        timing.wall_instant(wall, "Asia/Tokyo")


def test_fire_times_near_year_9999_stop_before_they_overflow() -> None:
    late = datetime(9999, 12, 25, tzinfo=UTC)
    cron = CronRepeat(expression="0 * * * *").next_fire_times(late, 1000, timezone="Pacific/Kiritimati")
    assert cron and all(f.at <= timing.MAX_INSTANT for f in cron)
    interval = IntervalRepeat(every_ms=86_400_000).next_fire_times(late, 100, timezone="Asia/Tokyo")
    assert 0 < len(interval) < 10 and interval[-1].at <= timing.MAX_INSTANT
    with pytest.raises(InvalidDatetime):
        IntervalRepeat(every_ms=3_600_000).next_fire_times(datetime.max.replace(tzinfo=UTC), 1)


@pytest.mark.parametrize(
    "expression",
    [
        ",".join(["0-59/1"] * 200) + " * * * *",  # over the length cap
        "1" * 5000 + " * * * *",  # a 5,000-digit value: refused by length, not int()
        "0001 * * * *",  # a 4-digit value
        "*/0100 * * * *",
        "0\x00 * * * *",
        "\ud800 * * * *",
    ],
)
def test_hostile_cron_expressions_are_invalid_cron(expression: str) -> None:
    with pytest.raises(InvalidCron):
        CronRepeat(expression=expression)


def test_the_longest_reasonable_cron_expression_is_accepted() -> None:
    every = ",".join(str(m) for m in range(60)) + " " + ",".join(str(h) for h in range(24))
    expression = f"{every} {','.join(str(d) for d in range(1, 32))} * *"
    assert len(expression) <= timing.MAX_CRON_LENGTH
    assert len(timing.parse_cron(expression).minutes) == 60
