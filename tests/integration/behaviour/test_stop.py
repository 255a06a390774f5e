"""``worker.stop()`` on every backend: with nothing in flight it returns within
:data:`PROMPT` seconds and leaves no thread of the SDK alive; with a fire in flight it waits the
grace it was given, then releases the claim, so a running peer fires the job at once (not when
the lease ends)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, JobStatus, OneShotSpec, ScheduleWorker
from schedule_sdk.adapters.clock import SystemClock
from schedule_sdk.testing import kit_container
from tests.support.waiting import HANG, wait_until

pytestmark = pytest.mark.every_backend

#: The documented bound of a stop with no fire in flight (seconds).
PROMPT = 1.0
#: What the SDK names its threads (every thread it starts).
PREFIX = "schedule-sdk"
#: The lease of the in-flight test: longer than any wait of the test, so a fire that came from the
#: lease's end would come too late.
LONG_LEASE = 4 * HANG


def at(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def one_shot(seconds: float, topic: str = "tests.stop") -> OneShotSpec:
    return OneShotSpec(topic=topic, run_at=at(seconds), timezone="UTC")


def sdk_threads(before: set[int | None]) -> list[str]:
    """The SDK's threads alive now that were not before."""
    alive = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    return sorted(t.name for t in alive if t.name.startswith(PREFIX))


def timed_stop(worker: ScheduleWorker, timeout: float | None = None) -> float:
    started = time.monotonic()
    worker.stop(timeout)
    return time.monotonic() - started


def existing() -> set[int | None]:
    return {t.ident for t in threading.enumerate()}


@pytest.mark.parametrize("situation", ["just-started", "after-fires", "waiting-for-future-jobs"])
def test_a_stop_with_nothing_in_flight_is_prompt_and_leaves_no_thread(backend, situation):
    before = existing()
    h = backend.harness(poll_interval=300.0)  # the poller sleeps toward the next due instant, not the net
    h.start()
    if situation == "after-fires":
        jobs = [h.service.schedule_at(one_shot(0.05 * n)) for n in range(1, 6)]
        for job in jobs:
            h.wait_status(job.id, "completed")
    elif situation == "waiting-for-future-jobs":
        for n in range(1, 4):
            h.service.schedule_at(one_shot(3600.0 * n))
        h.settle()  # a fire, then the poller (or the pump) sleeps toward an hour from now
    elapsed = timed_stop(h.worker)
    left = sdk_threads(before)
    assert elapsed <= PROMPT, f"stop() took {elapsed:.3f}s"
    assert not left, left
    assert not h.worker.running


def test_a_testing_kit_worker_stops_promptly_and_leaves_no_thread():
    """The testing kit's container (in-memory store, the inline substrate's queue)."""
    before = existing()
    container = kit_container(clock=SystemClock())
    worker = container.worker().start()
    job = container.schedule_service().schedule_at(one_shot(0.05))
    assert wait_until(lambda: container.store().get(job.id).status is JobStatus.COMPLETED)
    elapsed = timed_stop(worker)
    left = sdk_threads(before)
    assert elapsed <= PROMPT, f"stop() took {elapsed:.3f}s"
    assert not left, left


def test_a_fire_running_past_the_grace_is_released_at_once_and_a_running_peer_fires_it(backend):
    grace = 0.5
    first = backend.harness(lease_seconds=LONG_LEASE, worker_concurrency=1).deafen()
    entered, unblock = threading.Event(), threading.Event()

    def blocks(event):
        entered.set()
        unblock.wait(HANG)

    first.listen(SCHEDULE_ARRIVED_EVENT, blocks)
    first.start()
    job = first.service.schedule_at(one_shot(0.1))
    try:
        assert entered.wait(HANG)
        peer = backend.harness(lease_seconds=LONG_LEASE).start()
        elapsed = timed_stop(first.worker, grace)
        row = first.job(job.id)
        assert grace <= elapsed <= grace + PROMPT, f"stop({grace}) took {elapsed:.3f}s"
        # released (the peer may have taken it already), not left leased to the stopped worker
        assert row.claimed_by != first.worker.dispatcher.worker_id, row
        [event] = peer.wait_events(job.id, 1, timeout=HANG)  # long before the lease would end
        assert event.scheduled_job_id == job.id
        peer.wait_status(job.id, "completed")
    finally:
        unblock.set()
