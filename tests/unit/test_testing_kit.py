"""schedule_sdk.testing, used the way an application's own test suite would use it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    Backoff,
    IntervalRepeat,
    JobMetadata,
    JobStatus,
    ListenerRegistry,
    OneShotSpec,
    RepeatSpec,
    RetryPolicy,
    RunAtInPast,
    ScheduleArrivedEvent,
    every,
    schedule_arrived_event_name,
)
from schedule_sdk.testing import FakeClock, make_test_kit

START = datetime(2031, 5, 4, 9, 0, tzinfo=UTC)


# -- the application's code under test ------------------------------------------------------------


class ReminderMailer:
    """An app listener: sends a reminder mail, and fails while the mail server is down."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []
        self.server_down_for = 0

    def on_reminder(self, event: ScheduleArrivedEvent) -> None:
        if self.server_down_for:
            self.server_down_for -= 1
            raise ConnectionError("mail server down")
        assert event.user_payload is not None
        self.sent.append((event.user_payload["to"], event.occurrence))


@pytest.fixture
def mailer() -> ReminderMailer:
    return ReminderMailer()


@pytest.fixture
def kit(mailer: ReminderMailer):
    registry = ListenerRegistry()
    registry.connect(schedule_arrived_event_name("reminder"), mailer.on_reminder)
    return make_test_kit(registry, start=START)


def reminder(kit, at: timedelta, **options):
    spec = OneShotSpec(
        topic="reminder",
        run_at=kit.clock.now() + at,
        timezone="Europe/Lisbon",
        payload={"to": "ana"},
        **options,
    )
    return kit.service.schedule_at(spec)


#: What the declared schedule below received.
heartbeats: list[ScheduleArrivedEvent] = []


@every(timedelta(minutes=10), name="kit.heartbeat", payload={"beat": True})
def heartbeat(event: ScheduleArrivedEvent) -> None:
    heartbeats.append(event)


# -- the tests an app developer writes ------------------------------------------------------------


def test_the_listener_receives_the_event_when_the_clock_reaches_run_at(kit, mailer) -> None:
    job = reminder(kit, timedelta(minutes=30), metadata=JobMetadata(owner_id="u1"))
    kit.clock.advance(timedelta(minutes=29, seconds=59))
    assert kit.run_due() == []
    assert mailer.sent == []

    kit.clock.advance(1)
    kit.run_due()

    assert mailer.sent == [("ana", 1)]
    (event,) = kit.events
    assert event.scheduled_job_id == job.id
    assert event.scheduled_for == START + timedelta(minutes=30)
    assert event.fired_at == kit.clock.now()
    assert event.metadata.owner_id == "u1" and event.timezone == "Europe/Lisbon"
    assert kit.job(job.id).status is JobStatus.COMPLETED
    assert kit.run_due() == []  # fires once


def test_a_failing_listener_is_retried_with_exponential_backoff(kit, mailer) -> None:
    retry = RetryPolicy(attempts=4, backoff=Backoff(type="exponential", delay_ms=60_000))
    job = reminder(kit, timedelta(minutes=1), retry=retry)
    mailer.server_down_for = 2

    kit.run_due(until=timedelta(minutes=1))  # attempt 1 fails
    assert kit.job(job.id).attempt == 2
    assert kit.job(job.id).run_at == kit.clock.now() + timedelta(minutes=1)
    assert "mail server down" in (kit.job(job.id).last_error or "")

    kit.clock.advance(timedelta(seconds=59))
    assert kit.run_due() == []  # never early
    kit.run_due(until=timedelta(minutes=10))  # attempt 2 fails (+1 min), attempt 3 succeeds (+2 min)

    assert [e.attempt for e in kit.events] == [1, 2, 3]
    assert [e.fired_at - START for e in kit.events] == [timedelta(minutes=m) for m in (1, 2, 4)]
    assert mailer.sent == [("ana", 1)]
    assert kit.job(job.id).status is JobStatus.COMPLETED


def test_a_one_shot_fails_when_retries_are_exhausted(kit) -> None:
    job = reminder(kit, timedelta(seconds=10), retry=RetryPolicy(attempts=2, backoff=Backoff(delay_ms=0)))
    kit.publisher.fail_always()
    kit.run_due(until=timedelta(seconds=10))  # a zero backoff retries at once
    assert [e.attempt for e in kit.events] == [1, 2]
    assert kit.job(job.id).status is JobStatus.FAILED


def test_a_repeating_job_fires_each_occurrence(kit) -> None:
    seen: list[int] = []
    kit.registry.connect(SCHEDULE_ARRIVED_EVENT, lambda event: seen.append(event.occurrence))
    spec = RepeatSpec(topic="digest", timezone="UTC", repeat=IntervalRepeat(every_ms=15 * 60_000), limit=5)
    job = kit.service.schedule_repeat(spec)

    kit.run_due(until=timedelta(hours=1))
    assert seen == [1, 2, 3, 4]
    assert kit.clock.now() == START + timedelta(hours=1)
    assert [e.scheduled_for - START for e in kit.events] == [timedelta(minutes=15 * n) for n in (1, 2, 3, 4)]

    kit.run_due(until=timedelta(hours=5))
    assert seen == [1, 2, 3, 4, 5]
    assert kit.job(job.id).status is JobStatus.COMPLETED


def test_after_downtime_a_repeating_job_catches_up_once(kit) -> None:
    spec = RepeatSpec(topic="digest", timezone="UTC", repeat=IntervalRepeat(every_ms=60_000))
    job = kit.service.schedule_repeat(spec)
    kit.clock.advance(timedelta(minutes=10, seconds=30))  # nothing ran for ten minutes
    kit.run_due()
    assert len(kit.events) == 1
    assert kit.job(job.id).run_at == START + timedelta(minutes=11)


def test_a_cancelled_job_never_fires(kit, mailer) -> None:
    job = reminder(kit, timedelta(minutes=5))
    kit.service.cancel(job.id)
    kit.run_due(until=timedelta(days=1))
    assert mailer.sent == [] and kit.events == []
    assert kit.queue.entries == []


def test_validation_uses_the_fake_clock(kit) -> None:
    with pytest.raises(RunAtInPast):
        reminder(kit, timedelta(seconds=-1))
    assert kit.store.scan_open(None, 10) == []  # a refused call writes nothing


def test_the_queue_holds_each_pending_occurrence(kit) -> None:
    job = reminder(kit, timedelta(minutes=5))
    assert [(o.job_id, o.occurrence, o.attempt) for o in kit.queue.entries] == [(job.id, 1, 1)]
    kit.run_due(until=timedelta(minutes=5))
    assert kit.queue.entries == []


def test_fake_clock_is_aware_utc_and_moves_only_when_told() -> None:
    clock = FakeClock(datetime(2031, 1, 1, 12, tzinfo=UTC))
    assert clock.now() == clock.now()
    assert clock.advance(90) == datetime(2031, 1, 1, 12, 1, 30, tzinfo=UTC)
    assert clock.advance(timedelta(hours=1)).hour == 13
    assert clock.set(datetime(2030, 1, 1, tzinfo=UTC)).year == 2030
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):  # NaiveDatetime is a ValueError
        clock.set(datetime(2031, 1, 1))
    assert FakeClock().now().tzinfo is not None


def test_a_declared_schedule_is_synced_into_the_kit_store_and_fires_each_occurrence() -> None:
    heartbeats.clear()
    kit = make_test_kit(start=START)
    kit.container.declared_schedules().register(heartbeat)
    plan = kit.container.declared_sync().apply()
    assert [(i.name, i.action) for i in plan.items] == [("kit.heartbeat", "add")]
    assert kit.container.declared_sync().apply().rows_written == 0  # unchanged: nothing written
    [(row, owned)] = kit.store.read()
    assert row.name == "kit.heartbeat" and owned is not None and owned.id == row.job_id
    kit.run_due(until=timedelta(minutes=25))
    assert [e.user_payload for e in heartbeats] == [{"beat": True}, {"beat": True}]
    assert {e.scheduled_job_id for e in heartbeats} == {row.job_id}
