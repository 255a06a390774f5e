"""The examples of docs/howto/time-limits.md, run as tests (on the test kit: no servers)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from schedule_sdk import (
    Backoff,
    FireOutcome,
    ListenerRegistry,
    OneShotSpec,
    RetryPolicy,
    ScheduleArrivedEvent,
    ScheduleContainer,
    cron,
    schedule_arrived_event_name,
)
from schedule_sdk.core.declared import declarations_of
from schedule_sdk.domain.time_limits import TimeLimits
from schedule_sdk.testing import make_test_kit
from tests.support.waiting import wait_until

T0 = datetime(2031, 5, 4, 9, 0, tzinfo=UTC)


def build_spec(now: datetime) -> OneShotSpec:
    # --8<-- [start:spec]
    spec = OneShotSpec(
        topic="reports.build",
        run_at=now + timedelta(minutes=5),
        timezone="Europe/Berlin",
        time_limit=timedelta(minutes=10),  # listeners of one fire: at most 10 minutes
        retry=RetryPolicy(attempts=3, backoff=Backoff(type="exponential", delay_ms=30_000)),
    )
    # --8<-- [end:spec]
    return spec


def test_a_spec_carries_its_time_limit():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_at(build_spec(kit.clock.now()))
    assert kit.job(job.id).time_limit == timedelta(minutes=10)


def test_topic_limits_and_a_default_come_from_the_settings():
    container = ScheduleContainer()
    # --8<-- [start:settings]
    container.config.from_dict(
        {
            "time_limits": {"reports.build": timedelta(minutes=10), "mail.send": "30s"},
            "default_time_limit": "1h",  # every other job without a limit of its own
        }
    )
    # --8<-- [end:settings]
    limits = container.settings().time_limit_defaults
    assert limits == TimeLimits(
        by_topic={"reports.build": timedelta(minutes=10), "mail.send": timedelta(seconds=30)},
        default=timedelta(hours=1),
    )
    assert container.firing().time_limits == limits


# --8<-- [start:declared]
@cron("0 2 * * *", tz="Europe/Berlin", name="app.nightly-export", time_limit=timedelta(hours=1))
def nightly_export(event: ScheduleArrivedEvent) -> None: ...


# --8<-- [end:declared]


def test_a_declared_schedule_takes_a_time_limit():
    [declaration] = declarations_of(nightly_export)
    assert declaration.spec(T0).time_limit == timedelta(hours=1)


cleaned: list[str] = []


# --8<-- [start:async]
async def build_report(event: ScheduleArrivedEvent) -> None:
    try:
        await asyncio.Event().wait()  # stands for slow work that awaits
    except asyncio.CancelledError:  # the fire's time limit is over
        cleaned.append(event.scheduled_job_id)  # release what the listener holds, then re-raise
        raise


# --8<-- [end:async]


def test_an_async_listener_is_cancelled_at_the_limit_and_may_clean_up():
    registry = ListenerRegistry()
    registry.connect(schedule_arrived_event_name("reports.build"), build_report)
    kit = make_test_kit(registry, start=T0)
    try:
        spec = OneShotSpec(
            topic="reports.build", run_at=T0, timezone="UTC", time_limit=timedelta(milliseconds=50)
        )
        job = kit.service.schedule_at(spec)
        [result] = kit.run_due()
        assert result.fire is not None and result.fire.outcome is FireOutcome.TIMEOUT
        assert kit.job(job.id).status.value == "failed"
        assert wait_until(lambda: cleaned == [job.id])  # the cancellation runs on the listener loop
    finally:
        registry.loop.close()
