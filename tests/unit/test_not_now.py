"""Spread, jitter and calendars on the test kit (fake clock, memory store, the real fire path).

The expected fire dates are computed by a model written here from the rules (every weekday of
the year at 09:00 in the job's zone, minus the dates the calendar names, minus the holidays the
``holidays`` package lists), not with the code under test.
"""

from __future__ import annotations

import dataclasses
import sys
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import holidays
import pytest

from schedule_sdk import (
    Calendar,
    CronRepeat,
    Declaration,
    FireOutcome,
    HolidaySpec,
    IntervalRepeat,
    InvalidCalendar,
    InvalidDeclaration,
    InvalidSpread,
    JobMetadata,
    JobStatus,
    MisfirePolicy,
    OneShotSpec,
    RepeatSpec,
    ScheduleArrivedEvent,
    ScheduleMissedEvent,
    cron,
)
from schedule_sdk.domain.jobs import spread_offset_ms
from schedule_sdk.testing import FakeClock, kit_container, make_test_kit

BERLIN = ZoneInfo("Europe/Berlin")
T0 = datetime(2026, 12, 31, 12, 0, tzinfo=UTC)


def hourly(**changes: object) -> RepeatSpec:
    values: dict[str, object] = {
        "topic": "t.hourly",
        "timezone": "UTC",
        "repeat": CronRepeat(expression="0 * * * *"),
    }
    values.update(changes)
    return RepeatSpec(**values)  # type: ignore[arg-type]


# -- calendars ---------------------------------------------------------------------------------


def test_a_holiday_calendar_over_a_year_of_a_cron_fires_the_model_and_reports_each_excluded_date():
    extra_days = {date(2027, 12, 24), date(2027, 12, 31), date(2027, 7, 14)}
    calendar = Calendar(dates=extra_days, holidays=HolidaySpec(country="DE", subdivision="BY"))
    kit = make_test_kit(start=T0)
    spec = RepeatSpec(
        topic="payroll.run",
        timezone="Europe/Berlin",
        repeat=CronRepeat(expression="0 9 * * 1-5"),
        calendar=calendar,
        ends_at=datetime(2028, 1, 1, tzinfo=BERLIN),
    )
    job = kit.service.schedule_repeat(spec)

    kit.run_due(until=datetime(2028, 1, 2, tzinfo=UTC))

    bavaria = holidays.country_holidays("DE", subdiv="BY", years=2027)
    weekdays = [date(2027, 1, 1) + timedelta(days=n) for n in range(365)]
    weekdays = [d for d in weekdays if d.weekday() < 5]
    excluded = [d for d in weekdays if d in bavaria or d in extra_days]
    expected = [d for d in weekdays if d not in excluded]
    assert len(excluded) >= 10  # the model is not trivially empty
    fired = [e.scheduled_for.astimezone(BERLIN) for e in kit.events]
    assert [f.date() for f in fired] == expected
    assert {f.time() for f in fired} == {time(9, 0)}
    assert [e.fired_at for e in kit.events] == [e.scheduled_for for e in kit.events]  # never early
    missed = kit.publisher.missed
    assert all(m.reason == "excluded" and m.count == 1 for m in missed)
    assert [m.missed[0].astimezone(BERLIN).date() for m in missed] == excluded
    assert {m.missed[0].astimezone(BERLIN).time() for m in missed} == {time(9, 0)}
    history = []
    while page := kit.service.history(job.id, limit=500, before=history[-1].fired_at if history else None):
        history += page
    skipped = sorted(f.due_at.astimezone(BERLIN).date() for f in history if f.outcome is FireOutcome.SKIPPED)
    assert skipped == excluded
    assert all("excluded" in (f.error or "") for f in history if f.outcome is FireOutcome.SKIPPED)
    stored = kit.job(job.id)
    assert stored.status is JobStatus.COMPLETED and stored.calendar == calendar
    # an excluded occurrence is not counted by limit (it did not fire)
    assert stored.occurrence_count == len(expected)


def test_excluded_dates_are_judged_in_the_crons_zone():
    # 23:30 in Tokyo on Saturday 2027-01-02 is 14:30 UTC the same day; 08:30 UTC Monday is Monday
    kit = make_test_kit(start=datetime(2027, 1, 1, tzinfo=UTC))
    spec = RepeatSpec(
        topic="t.tokyo",
        timezone="UTC",
        repeat=CronRepeat(expression="30 23 * * *", timezone="Asia/Tokyo"),
        calendar=Calendar(weekdays=["sun"]),
    )
    job = kit.service.schedule_repeat(spec)
    preview = kit.service.preview(job.id, 7)
    flags = [(f.local.strftime("%a"), f.excluded) for f in preview]
    assert flags == [
        ("Fri", False),
        ("Sat", False),
        ("Sun", True),
        ("Mon", False),
        ("Tue", False),
        ("Wed", False),
        ("Thu", False),
    ]
    kit.run_due(until=timedelta(days=7))
    assert [e.scheduled_for for e in kit.events] == [f.at for f in preview if not f.excluded]
    assert [m.missed for m in kit.publisher.missed] == [(preview[2].at,)]


def test_an_excluded_occurrence_is_excluded_however_late_and_a_trigger_still_fires():
    kit = make_test_kit(start=datetime(2027, 1, 1, 10, 30, tzinfo=UTC))  # a Friday
    spec = hourly(calendar=Calendar(weekdays=[4]), misfire=MisfirePolicy(mode="fire_once"))
    job = kit.service.schedule_repeat(spec)
    kit.clock.advance(timedelta(hours=3))
    kit.run_due()
    assert kit.events == []
    excluded, coalesced = kit.publisher.missed
    assert excluded.reason == "excluded" and excluded.missed == (datetime(2027, 1, 1, 11, tzinfo=UTC),)
    # the ones passed over by the misfire policy meanwhile are the misfire policy's
    assert coalesced.reason == "misfire" and coalesced.count == 2
    kit.service.trigger(job.id)  # an operator's extra fire is not judged by the calendar
    kit.run_due()
    assert len(kit.events) == 1


def test_a_calendar_that_excludes_every_occurrence_is_refused_and_nothing_is_written():
    kit = make_test_kit(start=T0)
    christmas = RepeatSpec(
        topic="t.xmas",
        timezone="Europe/Berlin",
        repeat=CronRepeat(expression="0 9 25 12 *"),
        calendar=Calendar(holidays=HolidaySpec(country="DE")),
    )
    with pytest.raises(InvalidCalendar, match="every occurrence"):
        kit.service.schedule_repeat(christmas)
    weekends = hourly(repeat=CronRepeat(expression="0 9 * * 6,0"), calendar=Calendar(weekdays=["sat", "sun"]))
    with pytest.raises(InvalidCalendar, match="every occurrence"):
        kit.service.schedule_repeat(weekends)
    assert kit.service.list().items == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: Calendar(),
        lambda: Calendar(weekdays=range(7)),
        lambda: Calendar(weekdays=[7]),
        lambda: Calendar(weekdays=["someday"]),
        lambda: Calendar(dates=[datetime(2027, 1, 1, tzinfo=UTC)]),
        lambda: Calendar(dates="2027-01-01"),
        lambda: Calendar(dates=[date(2027, 1, 1) + timedelta(days=n) for n in range(5001)]),
        lambda: Calendar(holidays=HolidaySpec(country="D E")),
        lambda: RepeatSpec(
            topic="t", timezone="UTC", repeat=IntervalRepeat(every_ms=1000), calendar={"weekdays": [1]}
        ),
        lambda: RepeatSpec(
            topic="t",
            timezone="UTC",
            repeat=IntervalRepeat(every_ms=1000),
            calendar=Calendar(holidays=HolidaySpec(country="ZZ")),
        ),
    ],
)
def test_a_bad_calendar_is_refused_with_its_code(make):
    with pytest.raises(InvalidCalendar) as refused:
        make()
    assert refused.value.code == "SCHEDULE_INVALID_CALENDAR"


def test_a_calendar_round_trips_through_its_json_form():
    calendar = Calendar(
        dates=[date(2027, 5, 1)], weekdays=["sat", 6], holidays=HolidaySpec(country="FR", subdivision=None)
    )
    assert calendar.weekdays == frozenset({5, 6})
    assert Calendar.from_dict(calendar.to_dict()) == calendar
    adapted = Calendar.from_holidays(holidays.country_holidays("DE", subdiv="BY"))
    assert adapted.holidays == HolidaySpec(country="DE", subdivision="BY")
    assert adapted.excludes(date(2027, 1, 6)) and not adapted.excludes(date(2027, 1, 7))


# -- spread and jitter -------------------------------------------------------------------------


def test_spread_delays_every_occurrence_by_the_previewed_offset_and_events_keep_the_nominal_time():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(hourly(spread=timedelta(hours=1)))
    offset = timedelta(milliseconds=spread_offset_ms(job.id, 3_600_000))
    assert job.spread_offset == offset and job.scheduled_for == datetime(2026, 12, 31, 13, tzinfo=UTC)
    preview = kit.service.preview(job.id, 5)
    assert [f.nominal for f in preview] == [datetime(2026, 12, 31, 13 + n, tzinfo=UTC) for n in range(5)]
    assert [f.at - f.nominal for f in preview if f.nominal] == [offset] * 5

    fires = []
    for _ in range(5):
        kit.run_due(until=kit.store.next_due_at())
        fires.append(kit.clock.now())
    assert fires == [f.at for f in preview]  # each fire happened at its previewed instant, not before
    assert [e.scheduled_for for e in kit.events] == [f.nominal for f in preview]
    assert [e.fired_at for e in kit.events] == [f.at for f in preview]


def test_ten_thousand_hourly_jobs_are_spread_over_the_window():
    offsets = [spread_offset_ms(f"tenant-{n}", 3_600_000) for n in range(10_000)]
    assert all(0 <= o < 3_600_000 for o in offsets)
    per_minute = [0] * 60
    for o in offsets:
        per_minute[o // 60_000] += 1
    assert min(per_minute) > 100 and max(per_minute) < 240  # about 167 a minute, none at :00 alone


def test_a_spread_key_gives_a_spec_preview_and_keeps_the_offset_across_a_reschedule():
    kit = make_test_kit(start=T0)
    spec = hourly(spread=timedelta(minutes=30), spread_key="tenant-42")
    offset = timedelta(milliseconds=spread_offset_ms("tenant-42", 1_800_000))
    preview = kit.service.preview(spec, 3)
    assert [f.at - f.nominal for f in preview if f.nominal] == [offset] * 3
    job = kit.service.schedule_repeat(spec)
    assert job.run_at == preview[0].at
    moved = kit.service.reschedule(job.id, hourly(spread=timedelta(minutes=30), spread_key="tenant-42"))
    assert moved.spread_offset == offset
    changed = kit.service.reschedule(moved.id, hourly(spread=timedelta(minutes=10), spread_key="tenant-42"))
    assert changed.spread_ms == 600_000 and changed.spread_offset < timedelta(minutes=10)


def test_misfire_grace_counts_from_the_spread_due_time():
    kit = make_test_kit(start=T0)
    spec = hourly(
        spread=timedelta(hours=1), spread_key="k", misfire=MisfirePolicy(mode="skip", grace_ms=60_000)
    )
    job = kit.service.schedule_repeat(spec)
    due = job.run_at
    assert due > job.scheduled_for + timedelta(minutes=1)  # the offset of "k" is past the grace
    kit.clock.set(due + timedelta(seconds=59))  # late by 59 s from the spread due time: on time
    kit.run_due()
    assert len(kit.events) == 1 and kit.publisher.missed == []


def test_jitter_delays_each_occurrence_by_less_than_its_window_and_never_fires_early():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(hourly(jitter=timedelta(minutes=5)))
    for _ in range(20):
        kit.run_due(until=kit.store.next_due_at())
    for event in kit.events:
        assert timedelta(0) <= event.fired_at - event.scheduled_for < timedelta(minutes=5)
    assert len({e.fired_at - e.scheduled_for for e in kit.events}) > 1  # drawn per occurrence
    assert kit.job(job.id).jitter_ms == 300_000


def test_a_one_shot_may_be_spread_and_keeps_its_nominal_run_at_in_the_event():
    kit = make_test_kit(start=T0)
    run_at = T0 + timedelta(hours=1)
    spec = OneShotSpec(
        topic="t.once", run_at=run_at, timezone="UTC", spread=timedelta(minutes=10), spread_key="x"
    )
    job = kit.service.schedule_at(spec)
    assert job.scheduled_for == run_at and run_at <= job.run_at < run_at + timedelta(minutes=10)
    kit.run_due(until=timedelta(hours=2))
    [event] = kit.events
    assert event.scheduled_for == run_at and event.fired_at == job.run_at


@pytest.mark.parametrize(
    "changes",
    [
        {"spread": timedelta(0)},
        {"spread": timedelta(days=8)},
        {"spread": 60},
        {"jitter": timedelta(microseconds=10)},
        {"jitter": timedelta(days=7, seconds=1)},
        {"spread_key": "k"},
        {"spread": timedelta(hours=1), "spread_key": ""},
        {"spread": timedelta(hours=1), "spread_key": "a\x00b"},
    ],
)
def test_a_bad_spread_or_jitter_is_refused_with_its_code(changes):
    with pytest.raises(InvalidSpread) as refused:
        hourly(**changes)
    assert refused.value.code == "SCHEDULE_INVALID_SPREAD"


def test_the_missed_events_reason_survives_its_json_form():
    event = ScheduleMissedEvent(
        scheduled_job_id="j",
        topic="t",
        user_payload=None,
        metadata=JobMetadata(),
        timezone="UTC",
        policy="fire_once",
        missed=(T0,),
        count=1,
        detected_at=T0,
        reason="excluded",
    )
    assert ScheduleMissedEvent.from_dict(event.to_dict()) == event
    legacy = {k: v for k, v in event.to_dict().items() if k != "reason"}
    assert ScheduleMissedEvent.from_dict(legacy).reason == "misfire"


# -- declared schedules ------------------------------------------------------------------------


@cron(
    "0 9 * * *",
    tz="Europe/Berlin",
    name="tests.not-now.report",
    spread=timedelta(minutes=15),
    jitter=timedelta(seconds=5),
    calendar=Calendar(weekdays=["sun"]),
)
def declared_report(event: ScheduleArrivedEvent) -> None: ...


def test_a_declared_schedules_spread_comes_from_its_name_and_a_resync_writes_nothing():
    container = kit_container(clock=FakeClock(T0))
    container.declared_schedules().register(declared_report)
    assert container.declared_sync().apply().rows_written > 0
    [(row, job)] = container.declared_rows().read()
    assert job is not None and row.name == "tests.not-now.report"
    assert job.spread_offset_ms == spread_offset_ms("tests.not-now.report", 900_000)
    assert (job.spread_ms, job.jitter_ms, job.calendar) == (900_000, 5_000, Calendar(weekdays=[6]))
    nominal = job.scheduled_for
    assert nominal + job.spread_offset <= job.run_at < nominal + job.spread_offset + timedelta(seconds=5)
    assert container.declared_sync().apply().rows_written == 0


def test_the_options_enter_a_declarations_digest_only_when_given():
    plain = Declaration(name="n", kind="cron", topic="n", cron="0 9 * * *")
    assert not {"spread_ms", "jitter_ms", "calendar"} & set(plain.to_dict())  # old digests unchanged
    spread = dataclasses.replace(plain, spread=timedelta(minutes=1))
    calendar = dataclasses.replace(plain, calendar=Calendar(weekdays=[0]))
    assert len({plain.fingerprint, spread.fingerprint, calendar.fingerprint}) == 3


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"spread": timedelta(0)}, "SCHEDULE_INVALID_SPREAD"),
        ({"calendar": Calendar(weekdays=["sat"])}, "SCHEDULE_INVALID_CALENDAR"),  # on "0 9 * * 6"
    ],
)
def test_a_bad_declared_option_is_refused_when_the_function_is_decorated(options, code):
    with pytest.raises(InvalidDeclaration) as refused:
        cron("0 9 * * 6", name="tests.not-now.bad", **options)(declared_report)
    assert refused.value.reason_code == code


def test_a_spread_fire_keeps_the_dst_mark_of_its_nominal_instant():
    spec = RepeatSpec(
        topic="t.dst",
        timezone="America/New_York",
        repeat=CronRepeat(expression="30 2 * * *"),
        spread=timedelta(minutes=40),
        spread_key="k",
    )
    moved, normal = spec.next_fire_times(datetime(2026, 3, 8, tzinfo=UTC), 2)
    assert moved.nominal == datetime(2026, 3, 8, 7, tzinfo=UTC)  # 03:00 EDT, the end of the gap
    assert moved.mark == "moved" and normal.mark is None
    offset = timedelta(milliseconds=spread_offset_ms("k", 2_400_000))
    assert moved.at == moved.nominal + offset and moved.to_dict()["nominal"] == "2026-03-08T07:00:00+00:00"


def test_a_worker_without_the_holidays_package_fails_the_attempt_instead_of_firing(monkeypatch):
    from schedule_sdk.domain import calendars

    kit = make_test_kit(start=datetime(2027, 1, 4, 7, tzinfo=UTC))
    spec = RepeatSpec(
        topic="t.bavaria",
        timezone="Europe/Berlin",
        repeat=CronRepeat(expression="0 9 * * *"),
        calendar=Calendar(holidays=HolidaySpec(country="DE", subdivision="BY")),
    )
    job = kit.service.schedule_repeat(spec)
    calendars._holiday_dates.cache_clear()
    monkeypatch.setitem(sys.modules, "holidays", None)  # an import now fails
    kit.run_due(until=timedelta(hours=2))
    assert kit.events == []  # not fired as if nothing were excluded
    [entry] = kit.service.history(job.id)
    assert entry.outcome is FireOutcome.FAILED and "InvalidCalendar" in (entry.error or "")
    assert "holidays" in (kit.job(job.id).last_error or "")
    calendars._holiday_dates.cache_clear()
