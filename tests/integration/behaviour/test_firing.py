"""Fires on every backend: timing, events, listeners, retries, repeats, cancel mid-fire, stop."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    Backoff,
    CronRepeat,
    IntervalRepeat,
    JobMetadata,
    JobStatus,
    MisfirePolicy,
    OneShotSpec,
    RepeatSpec,
    RetryPolicy,
    schedule_arrived_event_name,
)
from schedule_sdk.domain import timing
from tests.support.waiting import wait_until

#: The poller's safety net in the wake-up tests: a fire that came from it came too late (a wait's
#: deadline, HANG, is far shorter).
SAFETY_NET = 300.0

#: The fire path's transactions: on the pooled and Sentinel backends too.
pytestmark = pytest.mark.every_backend


def at(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def one_shot(seconds: float = 0.3, **changes: object) -> OneShotSpec:
    values: dict[str, object] = {"topic": "tests.fire", "run_at": at(seconds), "timezone": "Europe/Berlin"}
    values.update(changes)
    return OneShotSpec(**values)  # type: ignore[arg-type]


def test_a_one_shot_fires_once_never_early_with_both_event_names(backend):
    h = backend.harness().start()
    topical: list[object] = []
    h.listen(schedule_arrived_event_name("tests.fire"), topical.append)
    meta = JobMetadata(owner_id="o", tenant_id="t", correlation_id="c", client_request_id="cr")
    job = h.service.schedule_at(one_shot(payload={"k": "v"}, metadata=meta))
    [event] = h.wait_events(job.id, 1)
    assert h.wait_for(lambda: len(topical) == 1)
    assert topical == [event]
    assert event.fired_at >= job.run_at  # never early
    assert event.scheduled_for == job.run_at and event.topic == "tests.fire"
    assert event.user_payload == {"k": "v"} and event.metadata == meta and event.timezone == "Europe/Berlin"
    assert (event.attempt, event.occurrence) == (1, 1)
    done = h.wait_status(job.id, "completed")
    assert done.occurrence_count == 1 and done.last_fired_at == event.fired_at and done.claimed_by is None
    h.settle()
    assert len(h.events_for(job.id)) == 1


def test_many_jobs_fire_in_due_order_and_none_early(backend):
    h = backend.harness().start()
    jobs = [h.service.schedule_at(one_shot(0.2 + (i % 10) * 0.05)) for i in range(40)]
    assert h.wait_for(lambda: len(h.events) == 40)
    for event in h.events:
        assert event.fired_at >= event.scheduled_for
    assert {e.scheduled_job_id for e in h.events} == {j.id for j in jobs}


def test_an_earlier_job_wakes_a_sleeping_worker(backend):
    h = backend.harness(poll_interval=SAFETY_NET).start()  # the safety net alone would be far too late
    h.service.schedule_at(one_shot(3600))
    h.settle()  # the poller now sleeps toward the job due in an hour
    job = h.service.schedule_at(one_shot(0.3))
    [event] = h.wait_events(job.id, 1)  # woken: the wait gives up long before the safety net
    assert event.scheduled_for <= event.fired_at < event.scheduled_for + timedelta(seconds=SAFETY_NET)


def test_a_job_with_no_listener_still_completes(backend):
    h = backend.harness().start()
    h.registry.clear()
    job = h.service.schedule_at(one_shot())
    assert h.wait_status(job.id, "completed").occurrence_count == 1


def test_a_raising_listener_fails_the_fire_and_the_whole_fire_is_retried(backend):
    h = backend.harness().start()
    calls: list[int] = []

    def flaky(event):
        calls.append(event.attempt)
        if event.attempt < 3:
            raise RuntimeError(f"boom {event.attempt}")

    h.listen(SCHEDULE_ARRIVED_EVENT, flaky)
    retry = RetryPolicy(attempts=3, backoff=Backoff(type="fixed", delay_ms=200))
    job = h.service.schedule_at(one_shot(retry=retry))
    events = h.wait_events(job.id, 3)
    done = h.wait_status(job.id, "completed")
    assert calls == [1, 2, 3]  # the healthy recorder listener ran on every attempt too
    assert [e.attempt for e in events] == [1, 2, 3] and {e.occurrence for e in events} == {1}
    gaps = [(b.fired_at - a.fired_at).total_seconds() for a, b in zip(events, events[1:], strict=False)]
    assert all(g >= 0.2 for g in gaps), gaps
    assert done.last_error is None or "boom" in done.last_error


def test_exponential_backoff_and_exhausted_retries_fail_a_one_shot(backend):
    h = backend.harness().start()

    def always_fails(event):
        raise ValueError("nope")

    h.listen(SCHEDULE_ARRIVED_EVENT, always_fails)
    retry = RetryPolicy(attempts=3, backoff=Backoff(type="exponential", delay_ms=150))
    job = h.service.schedule_at(one_shot(retry=retry))
    failed = h.wait_status(job.id, "failed")
    events = h.events_for(job.id)
    assert [e.attempt for e in events] == [1, 2, 3]
    gaps = [(b.fired_at - a.fired_at).total_seconds() for a, b in zip(events, events[1:], strict=False)]
    assert gaps[0] >= 0.15 and gaps[1] >= 0.30, gaps
    assert failed.last_error is not None and "nope" in failed.last_error
    assert failed.attempt == 3 and failed.occurrence_count == 1


def test_interval_repeats_are_fixed_rate_and_end_at_their_limit(backend):
    h = backend.harness().start()
    # a grace no loaded machine exceeds: an occurrence fired late is fired, not coalesced (fire_once
    # skips to the next one past its default grace), so the grid below holds whatever the load
    never_coalesced = MisfirePolicy(mode="fire_once", grace_ms=60_000)
    job = h.service.schedule_repeat(
        RepeatSpec(
            topic="tests.tick",
            timezone="UTC",
            repeat=IntervalRepeat(every_ms=250),
            limit=4,
            misfire=never_coalesced,
        )
    )
    events = h.wait_events(job.id, 4)
    done = h.wait_status(job.id, "completed")
    assert [e.occurrence for e in events] == [1, 2, 3, 4]
    assert [e.scheduled_for - job.run_at for e in events] == [
        timedelta(milliseconds=250 * i) for i in range(4)
    ]
    assert all(e.fired_at >= e.scheduled_for for e in events)
    assert done.occurrence_count == 4
    h.settle()
    assert len(h.events_for(job.id)) == 4


def test_a_failed_occurrence_of_a_repeating_job_does_not_stop_the_series(backend):
    h = backend.harness().start()

    def fail_first(event):
        if event.occurrence == 1:
            raise RuntimeError("first occurrence fails")

    h.listen(SCHEDULE_ARRIVED_EVENT, fail_first)
    job = h.service.schedule_repeat(
        RepeatSpec(topic="tests.series", timezone="UTC", repeat=IntervalRepeat(every_ms=200), limit=3)
    )
    events = h.wait_events(job.id, 3)
    assert [e.occurrence for e in events] == [1, 2, 3]
    assert h.wait_status(job.id, "completed").occurrence_count == 3


def test_a_repeating_job_catches_up_once_after_downtime(backend):
    h = backend.harness().start()
    job = h.service.schedule_repeat(
        RepeatSpec(topic="tests.catchup", timezone="UTC", repeat=IntervalRepeat(every_ms=200))
    )
    h.wait_events(job.id, 1)
    h.stop()
    h.wait_past(datetime.now(UTC) + timedelta(milliseconds=5 * 200))  # five occurrences are missed
    restarted = datetime.now(UTC)
    h2 = backend.harness()
    h2.start()
    events = h2.wait_events(job.id, 2)
    catch_up, following = events[0], events[1]
    assert catch_up.scheduled_for < restarted  # the one catch-up fire, late
    assert following.scheduled_for > restarted  # then the next occurrence after now
    assert following.occurrence == catch_up.occurrence + 1
    assert (following.scheduled_for - job.run_at) % timedelta(milliseconds=200) == timedelta(0)
    h2.service.cancel(job.id)


def test_cancel_during_a_fire_wins_and_nothing_fires_afterwards(backend):
    h = backend.harness().start()
    entered, release = threading.Event(), threading.Event()

    def slow(event):
        entered.set()
        release.wait(5)

    h.listen(SCHEDULE_ARRIVED_EVENT, slow)
    job = h.service.schedule_repeat(
        RepeatSpec(topic="tests.cancel", timezone="UTC", repeat=IntervalRepeat(every_ms=200))
    )
    assert entered.wait(5)
    assert h.job(job.id).status is JobStatus.ACTIVE
    h.service.cancel(job.id)
    release.set()
    h.wait_past(datetime.now(UTC) + timedelta(milliseconds=200))  # the next occurrence would be due
    h.settle()
    assert h.job(job.id).status is JobStatus.CANCELLED
    assert len(h.events_for(job.id)) == 1


def test_a_stale_queue_entry_never_resurrects_a_cancelled_job(backend):
    h = backend.harness()
    job = h.service.schedule_at(one_shot(0.05))
    h.service.cancel(job.id)
    h.wait_past(job.run_at)
    now = datetime.now(UTC)
    assert h.store.claim(job.id, 1, 1, now, "someone", now + timedelta(seconds=5)) is None
    h.start()
    h.settle()
    assert h.events_for(job.id) == [] and h.job(job.id).status is JobStatus.CANCELLED


def test_a_slow_listener_does_not_delay_other_jobs(backend):
    h = backend.harness(worker_concurrency=4).start()
    release = threading.Event()

    def slow_for_one_topic(event):
        if event.topic == "tests.slow":
            release.wait(5)

    h.listen(SCHEDULE_ARRIVED_EVENT, slow_for_one_topic)
    slow = h.service.schedule_at(one_shot(0.2, topic="tests.slow"))
    fast = h.service.schedule_at(one_shot(0.4, topic="tests.fast"))
    [event] = h.wait_events(fast.id, 1, timeout=5)
    assert h.job(slow.id).status is JobStatus.ACTIVE  # still running while the other fired
    assert event.fired_at >= event.scheduled_for
    release.set()
    h.wait_status(slow.id, "completed")


def test_async_listeners_run(backend):
    h = backend.harness().start()
    seen: list[str] = []

    async def on_arrived(event):
        import asyncio

        await asyncio.sleep(0.01)
        seen.append(event.scheduled_job_id)

    h.listen(schedule_arrived_event_name("tests.fire"), on_arrived)
    job = h.service.schedule_at(one_shot())
    assert h.wait_for(lambda: seen == [job.id])
    h.wait_status(job.id, "completed")


def test_graceful_stop_finishes_in_flight_fires_and_releases_the_rest(backend):
    h = backend.harness(worker_concurrency=1).start()
    entered = threading.Event()

    def slow(event):
        entered.set()
        time.sleep(0.5)

    h.listen(SCHEDULE_ARRIVED_EVENT, slow)
    first = h.service.schedule_at(one_shot(0.2))
    second = h.service.schedule_at(one_shot(0.25))
    assert entered.wait(5)
    h.wait_past(second.run_at)  # the second is due, waiting for the single listener thread
    h.stop(timeout=3)
    assert h.job(first.id).status is JobStatus.COMPLETED  # finished within the timeout
    assert h.job(second.id).status in (JobStatus.PENDING, JobStatus.COMPLETED)
    h2 = backend.harness().start()
    h2.wait_status(second.id, "completed")


def test_stop_returns_and_leaves_no_thread_behind(backend):
    before = {t.ident for t in threading.enumerate()}
    h = backend.harness().start()
    h.service.schedule_at(one_shot(3600))
    h.settle()
    stopper = threading.Thread(target=h.stop)
    stopper.start()
    stopper.join(timeout=30)  # a generous deadline: how fast it stops is bench material
    assert not stopper.is_alive(), "stop() did not return"
    h.container.shutdown_resources()

    def leftover() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]

    assert wait_until(lambda: not leftover(), 10), leftover()


@pytest.mark.parametrize(
    ("zone", "expression", "start", "expected"),
    [
        # fixed time in the spring-forward gap: once, at the transition
        (
            "America/New_York",
            "30 2 * * *",
            "2026-03-07T12:00:00Z",
            ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
        ),
        # fixed time in the fall-back overlap: once, at the first pass
        (
            "America/New_York",
            "30 1 * * *",
            "2026-10-31T12:00:00Z",
            ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        ),
        (
            "Europe/Berlin",
            "30 2 * * *",
            "2026-10-24T12:00:00Z",
            ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
        ),
        # wildcard hour: follows real time, both passes of the repeated hour
        (
            "Europe/Berlin",
            "*/30 2 * * *",
            "2026-10-24T23:50:00Z",
            ["2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z"],
        ),
    ],
)
def test_cron_dst_rules_through_the_whole_stack(backend, zone, expression, start, expected):
    """Occurrences are computed by the service and the fire path, stored, and read back."""
    from schedule_sdk.testing import FakeClock

    h = backend.harness()
    clock = FakeClock(datetime.fromisoformat(start))
    h.container.clock.override(clock)
    job = h.service.schedule_repeat(
        RepeatSpec(topic="tests.dst", timezone=zone, repeat=CronRepeat(expression=expression))
    )
    seen = [job.run_at]
    firing = h.container.firing()
    for _ in range(len(expected) - 1):
        clock.set(seen[-1])
        [claimed] = h.store.claim_due(clock.now(), 10, "dst", clock.now() + timedelta(seconds=30))
        firing.fire(claimed)
        seen.append(h.job(job.id).scheduled_for)
    assert [s.isoformat().replace("+00:00", "Z") for s in seen] == expected
    assert seen[0] == timing.next_cron_time(expression, zone, datetime.fromisoformat(start))


def test_a_job_scheduled_by_another_process_wakes_a_sleeping_worker(backend):
    """No in-process wake-up here: the worker learns of the job through the store (PostgreSQL
    LISTEN/NOTIFY, SQLite data_version) or the substrate, not through its safety net."""
    worker = backend.harness(poll_interval=SAFETY_NET).start()
    worker.service.schedule_at(one_shot(3600))
    worker.settle()  # the poller now sleeps toward the job due in an hour
    other = backend.harness()  # another container, as another process would have
    job = other.service.schedule_at(one_shot(0.3))
    [event] = worker.wait_events(job.id, 1)  # the wait gives up long before the safety net
    assert event.scheduled_for <= event.fired_at < event.scheduled_for + timedelta(seconds=SAFETY_NET)
