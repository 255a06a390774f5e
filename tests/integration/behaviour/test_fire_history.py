"""Fire history through the real fire path: what ``ScheduleService.history`` reports after fires,
retries, skips and a failed recording (it commits or rolls back with the fire's outcome)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    Backoff,
    FireOutcome,
    IntervalRepeat,
    InvalidCursor,
    MisfirePolicy,
    OneShotSpec,
    QueueUnavailable,
    RepeatSpec,
    RetryPolicy,
)
from schedule_sdk.core.firing import Firing
from schedule_sdk.testing import make_test_kit

T0 = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)


@pytest.mark.every_backend
def test_a_retried_fire_leaves_one_entry_per_attempt_on_every_backend(backend):
    h = backend.harness().start()

    def flaky(event):
        time.sleep(0.05)
        if event.attempt == 1:
            raise RuntimeError("boom <b>")

    h.listen(SCHEDULE_ARRIVED_EVENT, flaky)
    retry = RetryPolicy(attempts=2, backoff=Backoff(type="fixed", delay_ms=100))
    run_at = datetime.now(UTC) + timedelta(seconds=0.3)
    job = h.service.schedule_at(
        OneShotSpec(topic="tests.history", run_at=run_at, timezone="UTC", retry=retry)
    )
    events = h.wait_events(job.id, 2)
    h.wait_status(job.id, "completed")
    second, first = h.service.history(job.id)
    assert (first.attempt, first.outcome) == (1, FireOutcome.FAILED)
    assert first.error == "ListenerFailed: RuntimeError: boom <b>"  # as the job's last_error reads
    assert (second.attempt, second.outcome, second.error) == (2, FireOutcome.SUCCEEDED, None)
    assert first.traceback is not None and first.traceback.startswith("Traceback (most recent call last):")
    assert ", in flaky\n" in first.traceback and 'raise RuntimeError("boom <b>")' in first.traceback
    assert first.traceback.rstrip().endswith("RuntimeError: boom <b>")
    assert second.traceback is None
    for entry, event in zip((first, second), events, strict=True):
        assert (entry.job_id, entry.topic, entry.occurrence) == (job.id, "tests.history", 1)
        assert entry.fired_at == event.fired_at and entry.worker_id
        assert entry.lateness_ms == (entry.fired_at - entry.due_at) // timedelta(milliseconds=1) >= 0
        assert entry.duration_ms >= 50
    assert first.due_at == run_at and second.due_at >= first.fired_at + timedelta(milliseconds=100)


def test_lateness_duration_and_skips_on_a_fake_clock():
    kit = make_test_kit(start=T0)
    kit.registry.connect(SCHEDULE_ARRIVED_EVENT, lambda event: kit.clock.advance(2))
    every = IntervalRepeat(every_ms=60_000)
    skip = MisfirePolicy(mode="skip", grace_ms=1_000)
    job = kit.service.schedule_repeat(
        RepeatSpec(topic="tests.history", repeat=every, timezone="UTC", misfire=skip)
    )
    kit.clock.set(job.run_at + timedelta(milliseconds=700))  # within the grace: fires
    kit.run_due()
    kit.clock.set(job.run_at + timedelta(minutes=3, seconds=30))  # the 2nd is 2.5 min late: skipped
    kit.run_due()
    skipped, fired = kit.service.history(job.id)
    assert (fired.occurrence, fired.outcome, fired.lateness_ms, fired.duration_ms) == (
        1,
        FireOutcome.SUCCEEDED,
        700,
        2000,
    )
    assert (skipped.occurrence, skipped.outcome, skipped.duration_ms) == (2, FireOutcome.SKIPPED, 0)
    assert skipped.due_at == job.run_at + timedelta(minutes=1)


def test_history_is_written_with_the_outcome_or_not_at_all():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_at(OneShotSpec(topic="tests.history", run_at=T0, timezone="UTC"))
    claimed = kit.store.claim_due(T0, 10, "w1", T0 + timedelta(seconds=30))

    class Refusing(type(kit.queue)):  # type: ignore[misc]
        def enqueue(self, occurrences):
            raise QueueUnavailable("down")

    firing = Firing(store=kit.store, queue=Refusing(), publisher=kit.publisher, clock=kit.clock)
    retry_job = kit.service.schedule_at(
        OneShotSpec(topic="tests.history", run_at=T0, timezone="UTC", retry=RetryPolicy(attempts=2))
    )
    claimed += kit.store.claim_due(T0, 10, "w1", T0 + timedelta(seconds=30))
    kit.publisher.fail_always()
    with pytest.raises(QueueUnavailable):  # the retry's hand-over fails: the whole batch rolls back
        firing.record([firing.run(j) for j in claimed])
    assert kit.service.history(job.id) == [] and kit.service.history(retry_job.id) == []
    assert kit.job(job.id).status.value == "active"


def test_history_refuses_a_bad_limit_or_a_naive_cursor():
    kit = make_test_kit(start=T0)
    for bad in (0, 501, True):
        with pytest.raises(InvalidCursor):
            kit.service.history("x", limit=bad)
    with pytest.raises(InvalidCursor):
        kit.service.history("x", before=datetime(2030, 1, 1))
