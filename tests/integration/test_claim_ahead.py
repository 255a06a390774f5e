"""The fire path holds a job claimed ahead of its due instant (a worker on a real-time clock
claims ``CLAIM_AHEAD`` early) until its ``run_at``, judged by the listener's own ``time.time()``;
on a fake clock nothing waits. Fires claimed ahead by real workers are judged by the database's
clock in tests/processes/test_clock_processes.py.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    JobStatus,
    ListenerRegistry,
    OneShotSpec,
    ScheduleArrivedEvent,
)
from schedule_sdk.adapters.clock import SystemClock
from schedule_sdk.ports import FireResult
from schedule_sdk.testing import FakeClock, kit_container


def test_a_job_claimed_ahead_fires_no_earlier_than_its_run_at():
    registry = ListenerRegistry()
    heard: list[float] = []
    registry.connect(SCHEDULE_ARRIVED_EVENT, lambda event: heard.append(time.time()))
    container = kit_container(registry, SystemClock())
    store, firing = container.store(), container.firing()
    run_at = datetime.now(UTC) + timedelta(milliseconds=300)
    job = container.schedule_service().schedule_at(
        OneShotSpec(topic="tests.ahead", run_at=run_at, timezone="UTC")
    )
    # claimed 300 ms ahead (far more than a worker's lead), as a claim at that horizon would
    [claimed] = store.claim_due(job.run_at, 10, "w", job.run_at + timedelta(seconds=30))
    firing.run(claimed)
    assert heard and heard[0] >= job.run_at.timestamp(), (heard, job.run_at.timestamp())


def test_a_hold_waits_for_the_store_clock_to_be_known_and_then_for_the_run_at(monkeypatch):
    registry = ListenerRegistry()
    heard: list[float] = []
    registry.connect(SCHEDULE_ARRIVED_EVENT, lambda event: heard.append(time.time()))
    container = kit_container(registry, SystemClock())
    run_at = datetime.now(UTC) + timedelta(milliseconds=200)
    job = container.schedule_service().schedule_at(
        OneShotSpec(topic="tests.ahead", run_at=run_at, timezone="UTC")
    )
    [claimed] = container.store().claim_due(job.run_at, 10, "w", job.run_at + timedelta(seconds=30))
    store_time = container.store_time()
    known = store_time.claim_now
    asked: list[datetime | None] = []

    def unknown_at_first() -> datetime | None:  # as while the store does not answer
        asked.append(None if len(asked) < 2 else known())
        return asked[-1]

    monkeypatch.setattr(store_time, "claim_now", unknown_at_first)
    container.firing().run(claimed)
    assert heard and heard[0] >= job.run_at.timestamp(), (heard, job.run_at.timestamp())
    assert len(asked) >= 3 and asked[2] is not None  # it looked again until the offset was known


def test_a_fake_clock_holds_nothing():
    registry = ListenerRegistry()
    heard: list[ScheduleArrivedEvent] = []
    registry.connect(SCHEDULE_ARRIVED_EVENT, heard.append)
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    container = kit_container(registry, clock)
    job = container.schedule_service().schedule_at(
        OneShotSpec(topic="tests.ahead", run_at=clock.now() + timedelta(hours=1), timezone="UTC")
    )
    [claimed] = container.store().claim_due(job.run_at, 10, "w", job.run_at + timedelta(seconds=30))
    done = threading.Event()
    threading.Thread(target=lambda: (container.firing().run(claimed), done.set()), daemon=True).start()
    assert done.wait(10), "a fire on a fake clock waited for real time"
    assert len(heard) == 1


def test_the_event_is_stamped_by_the_reading_the_hold_waited_on(monkeypatch):
    """``fired_at`` is never before ``run_at`` or ``scheduled_for``, even when the clock's best
    estimate reads earlier than the instant the hold waited for (as after a new measurement of
    the offset, made by another thread, lowered it)."""
    registry = ListenerRegistry()
    heard: list[ScheduleArrivedEvent] = []
    registry.connect(SCHEDULE_ARRIVED_EVENT, heard.append)
    container = kit_container(registry, SystemClock())
    jobs = [
        container.schedule_service().schedule_at(
            OneShotSpec(
                topic="tests.ahead", run_at=datetime.now(UTC) + timedelta(milliseconds=50 + i), timezone="UTC"
            )
        )
        for i in range(20)
    ]
    store_time = container.store_time()
    estimate = store_time.now
    monkeypatch.setattr(store_time, "now", lambda: estimate() - timedelta(milliseconds=5))  # reads behind
    for job in jobs:
        [claimed] = container.store().claim_many(
            [(job.id, 1, 1)], job.run_at, "w", job.run_at + timedelta(seconds=30)
        )
        container.firing().run(claimed)
    assert len(heard) == len(jobs)
    assert all(e.fired_at >= e.scheduled_for for e in heard), [(e.fired_at, e.scheduled_for) for e in heard]


def test_a_job_cancelled_while_held_fires_no_listener_and_records_nothing():
    registry = ListenerRegistry()
    heard: list[ScheduleArrivedEvent] = []
    registry.connect(SCHEDULE_ARRIVED_EVENT, heard.append)
    container = kit_container(registry, SystemClock())
    service, store, firing = container.schedule_service(), container.store(), container.firing()
    job = service.schedule_at(
        OneShotSpec(
            topic="tests.ahead", run_at=datetime.now(UTC) + timedelta(milliseconds=300), timezone="UTC"
        )
    )
    [claimed] = store.claim_due(job.run_at, 10, "w", job.run_at + timedelta(seconds=30))
    fired: list[FireResult] = []
    holding = threading.Thread(target=lambda: fired.append(firing.run(claimed)), daemon=True)
    holding.start()
    service.cancel(job.id)  # while the fire path holds the claimed job
    holding.join(10)
    [result] = fired
    assert result.withdrawn and heard == []
    firing.record([result])
    assert store.get(job.id).status is JobStatus.CANCELLED
    assert service.history(job.id) == []
