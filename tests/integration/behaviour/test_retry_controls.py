"""Retry controls on every store x substrate, through the real fire path: ``retry_on`` /
``give_up_on`` (stored with the job as qualified names), the backoff cap, the ``schedule.failed``
event once a job gives up (delivered at least once: a failing listener gets it again), and the
log lines of each retry and of the give-up."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

from schedule_sdk import Backoff, OneShotSpec, RetryPolicy, schedule_arrived_event_name
from schedule_sdk.domain.events import (
    SCHEDULE_FAILED_EVENT,
    ScheduleFailedEvent,
    schedule_failed_event_name,
)
from schedule_sdk.domain.history import FireOutcome
from tests.support.waiting import wait_until

FAST = Backoff(type="fixed", delay_ms=50)


class _Flaky:
    """A listener raising ``errors`` in turn, then returning."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, event: object) -> None:
        with self._lock:
            self.calls += 1
            error = self.errors.pop(0) if self.errors else None
        if error is not None:
            raise error


def _soon(topic: str, retry: RetryPolicy) -> OneShotSpec:
    run_at = datetime.now(UTC) + timedelta(milliseconds=300)
    return OneShotSpec(topic=topic, run_at=run_at, timezone="UTC", retry=retry)


def test_give_up_on_and_retry_on_decide_which_errors_are_retried(backend):
    h = backend.harness().start()
    h.listen(schedule_arrived_event_name("retry.never"), _Flaky(ValueError("bad input"), ValueError("x")))
    h.listen(schedule_arrived_event_name("retry.only"), _Flaky(ConnectionResetError("reset"), KeyError("k")))
    h.listen(schedule_arrived_event_name("retry.any"), _Flaky(KeyError("k")))
    never = h.service.schedule_at(
        _soon("retry.never", RetryPolicy(attempts=3, backoff=FAST, give_up_on=(ValueError,)))
    )
    only = h.service.schedule_at(
        _soon("retry.only", RetryPolicy(attempts=5, backoff=FAST, retry_on=("builtins.ConnectionError",)))
    )
    plain = h.service.schedule_at(_soon("retry.any", RetryPolicy(attempts=3, backoff=FAST)))
    gave_up = h.wait_status(never.id, "failed")
    assert gave_up.attempt == 1 and gave_up.last_error == "ListenerFailed: ValueError: bad input"
    assert gave_up.retry.give_up_on == ("builtins.ValueError",)  # stored, read back by name
    # a ConnectionResetError is a ConnectionError (matched by its MRO): retried; the KeyError is not
    failed = h.wait_status(only.id, "failed")
    assert failed.attempt == 2 and failed.last_error == "ListenerFailed: KeyError: 'k'"
    assert failed.retry.retry_on == ("builtins.ConnectionError",)
    assert h.wait_status(plain.id, "completed").attempt == 2  # no lists: every error is retried


def test_the_backoff_cap_is_stored_and_bounds_the_wait(backend):
    h = backend.harness().start()
    h.listen(schedule_arrived_event_name("retry.capped"), _Flaky(OSError("down"), OSError("down")))
    policy = RetryPolicy(attempts=3, backoff=Backoff(type="exponential", delay_ms=60_000, max_delay_ms=100))
    job = h.service.schedule_at(_soon("retry.capped", policy))
    assert h.job(job.id).retry == policy
    done = h.wait_status(job.id, "completed", timeout=30)  # uncapped: 1 min, then 2 min of waiting
    assert done.attempt == 3
    second, third = sorted(h.service.history(job.id), key=lambda e: e.attempt)[1:]
    assert second.fired_at - second.due_at < timedelta(seconds=20)
    assert third.due_at - second.fired_at < timedelta(seconds=20)


def test_a_give_up_delivers_schedule_failed_at_least_once_and_logs_each_retry(backend, caplog):
    caplog.set_level(logging.INFO, logger="schedule_sdk")
    h = backend.harness().start()
    h.listen(schedule_arrived_event_name("retry.doomed"), _Flaky(*[ConnectionError("no route")] * 3))
    received: list[ScheduleFailedEvent] = []
    by_topic: list[ScheduleFailedEvent] = []
    first_fails = _Flaky(RuntimeError("the dead-letter sink is down"))

    def on_failed(event: ScheduleFailedEvent) -> None:
        first_fails(event)  # raises on the first delivery only: the notice is fired again
        received.append(event)

    h.listen(SCHEDULE_FAILED_EVENT, on_failed)
    h.listen(schedule_failed_event_name("retry.doomed"), by_topic.append)
    job = h.service.schedule_at(_soon("retry.doomed", RetryPolicy(attempts=3, backoff=FAST)))
    failed = h.wait_status(job.id, "failed")
    assert wait_until(lambda: received, timeout=30), first_fails.calls
    (event,) = received
    assert first_fails.calls == 2 and len(by_topic) == 2  # delivered again after the failure
    assert (event.scheduled_job_id, event.topic, event.occurrence, event.attempt) == (
        job.id,
        "retry.doomed",
        1,
        3,
    )
    assert event.error_type == "builtins.ConnectionError"
    assert event.error_message == "ConnectionError: no route"
    assert failed.last_error == "ListenerFailed: ConnectionError: no route"
    assert event.traceback is not None and "ConnectionError: no route" in event.traceback
    assert event.dedup_key == f"{job.id}:1:failed"
    lines = [r.getMessage() for r in caplog.records]
    assert f"job {job.id} attempt 1/3 failed: ConnectionError: no route; retrying in 50 ms" in lines
    assert f"job {job.id} attempt 2/3 failed: ConnectionError: no route; retrying in 50 ms" in lines
    assert f"job {job.id} gave up after 3 attempts: ConnectionError: no route" in lines
    assert h.job(job.id).last_outcome is FireOutcome.FAILED


def test_a_job_that_succeeds_emits_no_failed_event(backend):
    h = backend.harness().start()
    received: list[ScheduleFailedEvent] = []
    h.listen(SCHEDULE_FAILED_EVENT, received.append)
    h.listen(schedule_arrived_event_name("retry.fine"), _Flaky(ConnectionError("once")))
    job = h.service.schedule_at(_soon("retry.fine", RetryPolicy(attempts=2, backoff=FAST)))
    h.wait_status(job.id, "completed")
    h.settle()
    assert received == []
