"""The cron cases, through the public API on SQLite and PostgreSQL: the first ``run_at``
that ``schedule_repeat`` stores and the preview (of the spec and of the stored job) must be the
times Debian cron would run the entry at (see tests/unit/cron_model.py for the model)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    Backoff,
    CronRepeat,
    FireTime,
    IntervalRepeat,
    InvalidCron,
    JobNotFound,
    JobStatus,
    OneShotSpec,
    RepeatSpec,
    RetryPolicy,
    ScheduleValidationError,
)
from schedule_sdk.testing import FakeClock

STORES = pytest.mark.parametrize(
    "backend_combination",
    [
        pytest.param(("sqlite", "sql"), id="sqlite"),
        pytest.param(("postgres", "sql"), id="postgres", marks=pytest.mark.postgres),
    ],
    indirect=True,
)


def utc(fires: list[FireTime]) -> list[str]:
    return [f.at.isoformat().replace("+00:00", "Z") for f in fires]


def schedule(backend, expression: str, zone: str, now: str, n: int = 3) -> tuple[str, list[FireTime]]:
    """Schedule the cron at ``now``; return its first run_at and the preview, after checking that
    the spec's preview, the stored job's preview and the run_at agree."""
    h = backend.harness()
    h.container.clock.override(FakeClock(datetime.fromisoformat(now)))
    spec = RepeatSpec(topic="tests.cron", timezone=zone, repeat=CronRepeat(expression=expression))
    planned = h.service.preview(spec, n=n)
    job = h.service.schedule_repeat(spec)
    stored = h.service.preview(job.id, n=n)
    assert stored == planned
    assert job.run_at == planned[0].at == job.scheduled_for
    assert h.job(job.id).run_at == job.run_at
    return job.run_at.isoformat().replace("+00:00", "Z"), planned


@STORES
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0 2-2 * * *", ["2027-01-02T02:00:00Z", "2027-01-03T02:00:00Z"]),
        ("0 2-2/1 * * *", ["2027-01-02T02:00:00Z", "2027-01-03T02:00:00Z"]),
        ("0 2-2,4 * * *", ["2027-01-02T02:00:00Z", "2027-01-02T04:00:00Z"]),
        ("0 9 * * 1-1", ["2027-01-04T09:00:00Z", "2027-01-11T09:00:00Z"]),  # Mondays only
        ("5-5 * * * *", ["2027-01-01T05:05:00Z", "2027-01-01T06:05:00Z"]),
    ],
)
def test_case1_a_single_value_range_is_that_value(backend, expression, expected):
    run_at, fires = schedule(backend, expression, "UTC", "2027-01-01T05:00:00Z", n=2)
    assert run_at == expected[0] and utc(fires) == expected


@STORES
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # a day field begins with '*': a day must match both (Mondays that are 1, 4, 7, ... of the month)
        ("0 9 */3 * 1", ["2027-01-04T09:00:00Z", "2027-01-25T09:00:00Z", "2027-02-01T09:00:00Z"]),
        ("0 9 1 * */7", ["2027-08-01T09:00:00Z", "2028-10-01T09:00:00Z", "2029-04-01T09:00:00Z"]),
        # neither begins with '*': a day matches either (the 1st, or a Monday)
        ("0 9 1-1 * 1", ["2027-01-01T09:00:00Z", "2027-01-04T09:00:00Z", "2027-01-11T09:00:00Z"]),
    ],
)
def test_case2_day_fields_are_anded_when_either_begins_with_a_star(backend, expression, expected):
    run_at, fires = schedule(backend, expression, "UTC", "2027-01-01T05:00:00Z")
    assert run_at == expected[0] and utc(fires) == expected


@STORES
@pytest.mark.parametrize(
    ("expression", "zone", "now", "expected"),
    [
        # Apia skipped 2011-12-30 (-10:00 -> +14:00): no catch-up for the day that never was
        ("0 12 30 12 *", "Pacific/Apia", "2011-12-29T00:00:00Z", ["2012-12-29T22:00:00Z"]),
        (
            "0 12 * * *",
            "Pacific/Apia",
            "2011-12-29T00:00:00Z",
            ["2011-12-29T22:00:00Z", "2011-12-30T22:00:00Z"],
        ),
        # Casey went from +08:00 to +11:00 on 2009-10-18 02:00: 03:30 never was, and is not caught up
        ("30 3 * * *", "Antarctica/Casey", "2009-10-17T12:00:00Z", ["2009-10-18T16:30:00Z"]),
        # Casey went back from +11:00 to +08:00 (exactly 3 hours, not a reset): 00:30 runs once
        (
            "30 0 * * *",
            "Antarctica/Casey",
            "2010-03-04T12:00:00Z",
            ["2010-03-04T13:30:00Z", "2010-03-05T16:30:00Z"],
        ),
    ],
)
def test_case3_a_clock_change_of_three_hours_or_more_is_a_reset(backend, expression, zone, now, expected):
    run_at, fires = schedule(backend, expression, zone, now, n=len(expected))
    assert run_at == expected[0] and utc(fires) == expected
    assert [f.mark for f in fires] == [None] * len(expected)


@STORES
def test_case4_several_occurrences_in_one_gap_fire_once_at_the_transition(backend):
    # New York 2026-03-08: 02:00 EST -> 03:00 EDT; 02:00 and 02:30 never exist
    run_at, fires = schedule(backend, "0,30 2 * * *", "America/New_York", "2026-03-08T00:00:00Z")
    assert run_at == "2026-03-08T07:00:00Z"
    assert utc(fires) == ["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T06:30:00Z"]
    assert [f.mark for f in fires] == ["merged", None, None]
    assert fires[0].local.isoformat() == "2026-03-08T03:00:00-04:00"
    assert [w.isoformat() for w in fires[0].scheduled] == ["2026-03-08T02:00:00", "2026-03-08T02:30:00"]


@STORES
@pytest.mark.parametrize(
    "expression",
    [
        "0 0 L * *",
        "0 0 1W * *",
        "0 0 * * 1#2",
        "0 0 ? * *",
        "0 0 * * 5L",
        "0 22-2 * * *",
        "0 0 * * fri-mon",
        "5/15 * * * *",
    ],
)
def test_case5_syntax_beyond_vixie_cron_is_refused_and_nothing_is_written(backend, expression):
    h = backend.harness()
    with pytest.raises(InvalidCron) as refused:
        h.service.schedule_repeat(
            RepeatSpec(topic="tests.cron", timezone="UTC", repeat=CronRepeat(expression=expression))
        )
    assert refused.value.code == "SCHEDULE_INVALID_CRON"
    assert h.service.list(limit=500).items == []


# --- ScheduleService.preview ----------------------------------------------------------------------


def fire_once(h, clock: FakeClock, job_id: str) -> None:
    """Claim and fire the job's due occurrence at its run_at."""
    clock.set(h.job(job_id).run_at)
    [claimed] = h.store.claim_due(clock.now(), 10, "preview", clock.now() + timedelta(seconds=30))
    h.container.firing().fire(claimed)


@STORES
def test_preview_of_a_stored_job_follows_its_life(backend):
    h = backend.harness()
    clock = FakeClock(datetime.fromisoformat("2026-03-07T12:00:00Z"))
    h.container.clock.override(clock)
    spec = RepeatSpec(
        topic="tests.cron",
        timezone="America/New_York",
        repeat=CronRepeat(expression="30 2 * * *"),
        limit=3,
    )
    assert utc(h.service.preview(spec, n=5)) == [
        "2026-03-08T07:00:00Z",
        "2026-03-09T06:30:00Z",
        "2026-03-10T06:30:00Z",
    ]  # stops at the limit
    job = h.service.schedule_repeat(spec)
    fire_once(h, clock, job.id)
    assert utc(h.service.preview(job.id, n=5)) == ["2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"]
    fire_once(h, clock, job.id)
    fire_once(h, clock, job.id)
    assert h.job(job.id).status is JobStatus.COMPLETED
    assert h.service.preview(job.id) == []


@STORES
def test_preview_puts_a_pending_retry_first(backend):
    h = backend.harness()
    clock = FakeClock(datetime.fromisoformat("2026-06-01T08:00:00Z"))
    h.container.clock.override(clock)

    def always_fails(event):
        raise RuntimeError("down")

    h.listen(SCHEDULE_ARRIVED_EVENT, always_fails)
    job = h.service.schedule_repeat(
        RepeatSpec(
            topic="tests.cron",
            timezone="UTC",
            repeat=CronRepeat(expression="0 9 * * *"),
            retry=RetryPolicy(attempts=2, backoff=Backoff(delay_ms=60_000)),
            ends_at=datetime.fromisoformat("2026-06-03T09:00:00Z"),
        )
    )
    fire_once(h, clock, job.id)
    fires = h.service.preview(job.id, n=5)
    # the retry, then the occurrences after it, up to ends_at
    assert utc(fires) == ["2026-06-01T09:01:00Z", "2026-06-02T09:00:00Z", "2026-06-03T09:00:00Z"]
    assert [f.mark for f in fires] == [None, None, None]


@STORES
def test_preview_of_one_shots_intervals_and_cancelled_jobs(backend):
    h = backend.harness()
    now = datetime.fromisoformat("2026-06-01T08:00:00Z")
    h.container.clock.override(FakeClock(now))
    run_at = now + timedelta(hours=1)
    one_shot = OneShotSpec(topic="tests.cron", run_at=run_at, timezone="Asia/Tokyo")
    (planned,) = h.service.preview(one_shot)
    assert planned.at == run_at and planned.local.isoformat() == "2026-06-01T18:00:00+09:00"
    job = h.service.schedule_at(one_shot)
    assert h.service.preview(job.id) == [planned]
    h.service.cancel(job.id)
    assert h.service.preview(job.id) == []

    every = RepeatSpec(topic="tests.cron", timezone="UTC", repeat=IntervalRepeat(every_ms=90_000))
    planned_fires = h.service.preview(every, n=3)
    job = h.service.schedule_repeat(every)
    assert job.run_at == planned_fires[0].at == now + timedelta(seconds=90)
    assert (
        utc(h.service.preview(job.id, n=3))
        == utc(planned_fires)
        == [
            "2026-06-01T08:01:30Z",
            "2026-06-01T08:03:00Z",
            "2026-06-01T08:04:30Z",
        ]
    )


@STORES
def test_preview_refuses_bad_requests(backend):
    h = backend.harness()
    with pytest.raises(JobNotFound):
        h.service.preview("01900000-0000-7000-8000-00000000dead")
    spec = RepeatSpec(topic="tests.cron", timezone="UTC", repeat=CronRepeat(expression="0 9 * * *"))
    for n in (0, 1001, "5"):
        with pytest.raises(ScheduleValidationError):
            h.service.preview(spec, n=n)
    with pytest.raises(TypeError):
        h.service.preview(42)
