"""The examples of docs/howto/spread.md, jitter.md and calendars.md, run as tests on the test kit."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import holidays

from schedule_sdk import (
    SCHEDULE_MISSED_EVENT,
    Calendar,
    CronRepeat,
    HolidaySpec,
    ListenerRegistry,
    RepeatSpec,
    ScheduleArrivedEvent,
    cron,
)
from schedule_sdk.testing import make_test_kit

START = datetime(2027, 12, 23, 12, 0, tzinfo=UTC)


def test_spread_tenants_over_the_hour():
    kit = make_test_kit(start=START)
    service = kit.service
    # --8<-- [start:spread]
    tenants = [f"tenant-{n}" for n in range(1000)]
    jobs = [
        service.schedule_repeat(
            RepeatSpec(
                topic="mail.digest",
                timezone="UTC",
                repeat=CronRepeat(expression="0 * * * *"),
                payload={"tenant": tenant},
                spread=timedelta(hours=1),  # each tenant at its own minute of the hour
                spread_key=tenant,  # the same offset across reschedules and deploys
            )
        )
        for tenant in tenants
    ]
    first = service.preview(jobs[0].id, 3)
    for fire in first:
        print(fire.nominal, "->", fire.at)  # e.g. 13:00:00 -> 13:41:07.215
    # --8<-- [end:spread]
    assert all(f.nominal is not None and timedelta(0) <= f.at - f.nominal < timedelta(hours=1) for f in first)
    minutes = {(j.run_at - j.scheduled_for) // timedelta(minutes=1) for j in jobs}
    assert len(minutes) == 60  # every minute of the hour is used
    kit.run_due(until=first[0].at)
    [event] = kit.publisher.events_for(jobs[0].id)
    assert event.scheduled_for == first[0].nominal and event.fired_at == first[0].at


def test_jitter_is_drawn_per_occurrence():
    kit = make_test_kit(start=START)
    service = kit.service
    # --8<-- [start:jitter]
    job = service.schedule_repeat(
        RepeatSpec(
            topic="cache.refresh",
            timezone="UTC",
            repeat=CronRepeat(expression="*/10 * * * *"),
            jitter=timedelta(seconds=30),  # a random delay of 0 to 30 s, drawn for each occurrence
        )
    )
    # --8<-- [end:jitter]
    kit.run_due(until=timedelta(hours=1, minutes=1))  # 12:10 to 13:00, each up to 30 s late
    delays = [e.fired_at - e.scheduled_for for e in kit.publisher.events_for(job.id)]
    assert len(delays) == 6 and all(timedelta(0) <= d < timedelta(seconds=30) for d in delays)


def test_a_calendar_skips_holidays_and_reports_them():
    missed = []
    registry = ListenerRegistry()
    registry.connect(SCHEDULE_MISSED_EVENT, missed.append)
    kit = make_test_kit(registry, start=START)
    service = kit.service
    # --8<-- [start:calendar]
    calendar = Calendar(
        weekdays=["sat", "sun"],
        dates=[date(2027, 12, 24), date(2027, 12, 31)],  # the office is closed
        holidays=HolidaySpec(country="DE", subdivision="BY"),  # pip install 'schedule-sdk[holidays]'
    )
    job = service.schedule_repeat(
        RepeatSpec(
            topic="payroll.export",
            timezone="Europe/Berlin",
            repeat=CronRepeat(expression="0 9 * * *"),
            calendar=calendar,
        )
    )
    for fire in service.preview(job.id, 7):
        print(fire.local.date(), "excluded" if fire.excluded else "fires")
    # --8<-- [end:calendar]
    kit.run_due(until=datetime(2028, 1, 5, tzinfo=UTC))
    fired = [e.scheduled_for.date() for e in kit.publisher.events_for(job.id)]
    assert fired == [
        date(2027, 12, 27),
        date(2027, 12, 28),
        date(2027, 12, 29),
        date(2027, 12, 30),
        date(2028, 1, 3),
        date(2028, 1, 4),
    ]
    assert [m.missed[0].date() for m in missed] == [
        date(2027, 12, 24),  # a listed date
        date(2027, 12, 25),  # Saturday (and Christmas)
        date(2027, 12, 26),
        date(2027, 12, 31),
        date(2028, 1, 1),
        date(2028, 1, 2),
    ]
    assert {m.reason for m in missed} == {"excluded"}
    # --8<-- [start:adapter]
    bavaria = holidays.country_holidays("DE", subdiv="BY")  # a holidays-package calendar
    calendar = Calendar.from_holidays(bavaria, weekdays=["sat", "sun"])
    # --8<-- [end:adapter]
    assert calendar.holidays == HolidaySpec(country="DE", subdivision="BY")


# --8<-- [start:declared]
@cron(
    "0 9 * * *",
    tz="Europe/Berlin",
    name="reports.daily",
    spread=timedelta(minutes=15),  # derived from the name: stable across syncs
    calendar=Calendar(weekdays=["sat", "sun"], holidays=HolidaySpec(country="DE")),
)
def daily_report(event: ScheduleArrivedEvent) -> None: ...


# --8<-- [end:declared]


def test_the_declared_options_are_part_of_the_declaration():
    from schedule_sdk.core.declared import declarations_of

    [declaration] = declarations_of(daily_report)
    assert declaration.to_dict()["spread_ms"] == 900_000
    assert declaration.to_dict()["calendar"]["holidays"] == {"country": "DE", "subdivision": None}
