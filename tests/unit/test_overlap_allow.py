"""The overlap policy ``allow`` on the test kit (fake clock, memory store): every occurrence is
handed to a run, a one-shot row of its own, so it fires at its due time even while an earlier
occurrence's listener still runs.

A listener that "runs long" here really blocks (on a :class:`threading.Event`) in a thread of its
own while the test fires the next occurrence from the main thread: the kit fires only inside
``run_due()``, in the calling thread. The same policy on real workers of every backend is in
tests/processes/test_overlap_processes.py.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    ConcurrencyLimit,
    FireOutcome,
    IntervalRepeat,
    InvalidOverlap,
    JobMetadata,
    JobStatus,
    ListenerRegistry,
    MisfirePolicy,
    OneShotSpec,
    RepeatSpec,
    RetryPolicy,
    ScheduleArrivedEvent,
    every,
)
from schedule_sdk.core.declared import declarations_of
from schedule_sdk.domain.leases import Lease
from schedule_sdk.testing import make_test_kit

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
WAIT = 10.0  # seconds a test waits for another thread before it fails (never a fixed sleep)


def seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


def every_10s(**changes: object) -> RepeatSpec:
    values: dict[str, object] = {
        "topic": "t.allow",
        "timezone": "UTC",
        "repeat": IntervalRepeat(every_ms=10_000),
        "overlap": "allow",
    }
    values.update(changes)
    return RepeatSpec(**values)  # type: ignore[arg-type]


def runs_of(kit, job_id: str):
    return sorted(
        (j for j in kit.service.list(limit=100).items if j.run_of == job_id), key=lambda j: j.occurrence
    )


class Blocking:
    """A listener that blocks the fire of each occurrence in ``blocked`` until released."""

    def __init__(self, blocked: set[int]) -> None:
        self.blocked = blocked
        self.entered: dict[int, threading.Event] = {o: threading.Event() for o in blocked}
        self.release = threading.Event()
        self.running: set[int] = set()
        self.seen_running: list[tuple[int, frozenset[int]]] = []  # (occurrence, others running then)
        self._lock = threading.Lock()

    def __call__(self, event: ScheduleArrivedEvent) -> None:
        with self._lock:
            self.seen_running.append((event.occurrence, frozenset(self.running)))
            self.running.add(event.occurrence)
        try:
            if event.occurrence in self.blocked:
                self.entered[event.occurrence].set()
                assert self.release.wait(WAIT), "the test never released the listener"
        finally:
            with self._lock:
                self.running.discard(event.occurrence)


def test_a_blocked_fire_does_not_hold_back_the_next_occurrence():
    registry = ListenerRegistry()
    listener = Blocking({1})
    registry.connect(SCHEDULE_ARRIVED_EVENT, listener)
    kit = make_test_kit(registry, start=T0)
    # --8<-- [start:allow]
    job = kit.service.schedule_repeat(
        RepeatSpec(topic="t.allow", timezone="UTC", repeat=IntervalRepeat(every_ms=10_000), overlap="allow")
    )
    # --8<-- [end:allow]
    kit.clock.set(T0 + seconds(10))
    first = threading.Thread(target=kit.run_due)  # occurrence 1: its listener blocks
    first.start()
    try:
        assert listener.entered[1].wait(WAIT)
        kit.clock.set(T0 + seconds(20))
        kit.run_due()  # occurrence 2 fires at its due time, occurrence 1 still running
        assert listener.seen_running[-1] == (2, frozenset({1}))
    finally:
        listener.release.set()
        first.join(WAIT)
    assert not first.is_alive()
    events = kit.publisher.events_for(job.id)  # every event names the job, not its run
    assert [
        (e.occurrence, e.scheduled_for, e.fired_at) for e in sorted(events, key=lambda e: e.occurrence)
    ] == [
        (1, T0 + seconds(10), T0 + seconds(10)),
        (2, T0 + seconds(20), T0 + seconds(20)),
    ]
    assert kit.publisher.events == events and kit.publisher.missed == []
    # the job moved on; the runs are completed one-shots that name it
    parent = kit.job(job.id)
    assert (parent.status, parent.occurrence, parent.scheduled_for) == (
        JobStatus.PENDING,
        3,
        T0 + seconds(30),
    )
    assert parent.occurrence_count == 2 and parent.run_of is None
    runs = runs_of(kit, job.id)
    assert [(r.occurrence, r.status, r.scheduled_for, r.repeat) for r in runs] == [
        (1, JobStatus.COMPLETED, T0 + seconds(10), None),
        (2, JobStatus.COMPLETED, T0 + seconds(20), None),
    ]
    # the history is the job's: one entry per occurrence, under its id
    history = sorted(kit.service.history(job.id), key=lambda f: f.occurrence)
    assert [(f.job_id, f.occurrence, f.attempt, f.outcome) for f in history] == [
        (job.id, 1, 1, FireOutcome.SUCCEEDED),
        (job.id, 2, 1, FireOutcome.SUCCEEDED),
    ]
    assert [f.due_at for f in history] == [T0 + seconds(10), T0 + seconds(20)]
    assert all(kit.service.history(r.id) == [] for r in runs)


def test_a_run_carries_the_jobs_payload_policies_and_metadata_but_not_its_request_id():
    kit = make_test_kit(start=T0)
    limit = ConcurrencyLimit(key="reports", limit=3)
    job = kit.service.schedule_repeat(
        every_10s(
            payload={"report": "daily"},
            metadata=JobMetadata(owner_id="o1", tenant_id="t1", client_request_id="req-1"),
            retry=RetryPolicy(attempts=3),
            time_limit=timedelta(seconds=40),
            concurrency=limit,
            timezone="Europe/Berlin",
        )
    )
    [parent] = kit.store.claim_due(T0 + seconds(10), 1, "w1", T0 + seconds(40))
    kit.clock.set(T0 + seconds(12))
    result = kit.firing.fire(parent)
    assert result.fire is None and result.run is not None  # no listener ran for the job itself
    run = kit.job(result.run.id)
    assert run.run_of == job.id and run.status is JobStatus.PENDING
    assert (run.topic, run.payload, run.timezone) == ("t.allow", {"report": "daily"}, "Europe/Berlin")
    assert run.metadata == JobMetadata(owner_id="o1", tenant_id="t1")
    assert (run.retry, run.time_limit, run.concurrency) == (
        RetryPolicy(attempts=3),
        timedelta(seconds=40),
        limit,
    )
    assert (run.run_at, run.scheduled_for, run.occurrence, run.attempt) == (
        T0 + seconds(10),
        T0 + seconds(10),
        1,
        1,
    )
    assert (run.repeat, run.overlap, run.limit) == (None, None, None)
    assert kit.job(job.id).scheduled_for == T0 + seconds(20)
    assert kit.queue.history[-1].job_id == run.id  # handed to the queue like a next occurrence


def test_a_run_is_retried_by_the_jobs_retry_policy_and_its_history_stays_the_jobs():
    registry = ListenerRegistry()
    kit = make_test_kit(registry, start=T0)

    def fail_first(event: ScheduleArrivedEvent) -> None:
        if event.attempt == 1:
            raise RuntimeError("the first attempt fails")

    registry.connect(SCHEDULE_ARRIVED_EVENT, fail_first)
    job = kit.service.schedule_repeat(every_10s(retry=RetryPolicy(attempts=2), limit=1))
    kit.run_due(until=seconds(15))
    events = kit.publisher.events_for(job.id)
    assert [(e.occurrence, e.attempt) for e in events] == [(1, 1), (1, 2)]
    history = sorted(kit.service.history(job.id), key=lambda f: f.attempt)
    assert [(f.occurrence, f.attempt, f.outcome) for f in history] == [
        (1, 1, FireOutcome.FAILED),
        (1, 2, FireOutcome.SUCCEEDED),
    ]
    assert kit.job(job.id).status is JobStatus.COMPLETED  # limit 1: the one occurrence was handed over
    [run] = runs_of(kit, job.id)
    assert run.status is JobStatus.COMPLETED and run.attempt == 2


def test_limit_counts_the_occurrences_handed_over():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_10s(limit=3))
    kit.run_due(until=seconds(60))
    assert [e.occurrence for e in kit.publisher.events_for(job.id)] == [1, 2, 3]
    parent = kit.job(job.id)
    assert parent.status is JobStatus.COMPLETED and parent.occurrence_count == 3
    assert [r.occurrence for r in runs_of(kit, job.id)] == [1, 2, 3]


def test_an_occurrence_whose_claim_was_lost_spawns_no_second_run():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_10s())
    lease = Lease(30.0)
    now = T0 + seconds(10)
    [stale] = kit.store.claim_due(now, 1, "dead", lease.until(now))
    zombie = kit.firing.run(stale)  # a worker that ran it and then stopped answering
    assert zombie.run is not None
    # its lease ends: the reconciler returns the row to pending, and another worker claims it
    assert [j.id for j in kit.store.release_expired(now + seconds(31), 10)] == [job.id]
    now = now + seconds(31)
    kit.clock.set(now)
    [again] = kit.store.claim_due(now, 1, "survivor", lease.until(now))
    assert again.occurrence == 1
    kit.firing.record([zombie])  # too late: the row is another worker's
    assert runs_of(kit, job.id) == []
    kit.firing.fire(again)
    kit.firing.record([zombie])  # and again, after the job moved on
    kit.run_due()
    assert Counter(r.occurrence for r in runs_of(kit, job.id)) == {1: 1}
    assert [e.occurrence for e in kit.publisher.events_for(job.id)] == [1]


def test_cancelling_the_job_stops_its_occurrences_but_not_a_run_already_handed_over():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_10s())
    now = T0 + seconds(10)
    [parent] = kit.store.claim_due(now, 1, "w1", now + seconds(30))
    kit.clock.set(now)
    run = kit.firing.fire(parent).run
    assert run is not None
    kit.service.cancel(job.id)
    kit.run_due(until=seconds(60))
    assert [e.occurrence for e in kit.publisher.events_for(job.id)] == [1]  # the run fired, nothing after
    assert kit.job(job.id).status is JobStatus.CANCELLED
    assert kit.job(run.id).status is JobStatus.COMPLETED


def test_a_run_can_be_cancelled_by_its_own_id():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_10s(limit=1))
    now = T0 + seconds(10)
    [parent] = kit.store.claim_due(now, 1, "w1", now + seconds(30))
    kit.clock.set(now)
    run = kit.firing.fire(parent).run
    assert run is not None
    kit.service.cancel(run.id)
    kit.run_due(until=seconds(30))
    assert kit.publisher.events == [] and kit.job(run.id).status is JobStatus.CANCELLED
    assert kit.job(job.id).status is JobStatus.COMPLETED  # its one occurrence was handed over


@pytest.mark.parametrize("policy", ["allow", "skip", "buffer_one"])
def test_a_one_shot_refuses_allow_like_every_policy_and_nothing_is_written(policy):
    kit = make_test_kit(start=T0)
    with pytest.raises(InvalidOverlap, match="one-shot"):
        kit.service.schedule_at(
            OneShotSpec(topic="t.once", run_at=T0 + seconds(60), timezone="UTC", overlap=policy)  # type: ignore[arg-type]
        )
    assert kit.service.list().items == []


def test_allow_is_stored_and_shown():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_10s())
    assert kit.job(job.id).overlap == "allow" and kit.job(job.id).run_of is None


@every(timedelta(minutes=5), name="app.poll-feeds", overlap="allow")
def poll_feeds(event: ScheduleArrivedEvent) -> None:
    """Poll the feeds every five minutes, even while a slow poll still runs."""


def test_a_declared_schedule_takes_allow():
    [declared] = declarations_of(poll_feeds)
    assert declared.overlap == "allow" and declared.spec(T0).overlap == "allow"
    assert declared.to_dict()["overlap"] == "allow"


def test_a_triggered_extra_fire_is_handed_to_a_run_and_the_schedule_continues():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_10s())
    kit.clock.set(T0 + seconds(3))
    kit.service.trigger(job.id)
    kit.run_due(until=seconds(12))
    events = kit.publisher.events_for(job.id)
    assert [(e.occurrence, e.fired_at) for e in events] == [(1, T0 + seconds(3)), (2, T0 + seconds(10))]
    assert [r.occurrence for r in runs_of(kit, job.id)] == [1, 2]
    parent = kit.job(job.id)
    assert (
        parent.scheduled_for == T0 + seconds(20) and parent.occurrence_count == 1
    )  # extra fires not counted


def test_an_occurrence_the_misfire_policy_skips_spawns_no_run():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_10s(misfire=MisfirePolicy(mode="skip", grace_ms=1000)))
    kit.clock.set(T0 + seconds(15))  # 12:00:10 is 5 s late: missed
    kit.run_due()
    assert runs_of(kit, job.id) == [] and kit.publisher.events == []
    [missed] = kit.publisher.missed
    assert missed.reason == "misfire" and missed.scheduled_job_id == job.id
    assert [f.outcome for f in kit.service.history(job.id)] == [FireOutcome.SKIPPED]
