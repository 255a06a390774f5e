"""Concurrency keys through the service on every backend (sqlite/postgres x sql/rq): stored and
read back, refused with a typed error and nothing written, changed by reschedule, held by a
repeating job, and a waiting fire starting when a slot frees rather than at the next poll."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    ConcurrencyLimit,
    IntervalRepeat,
    JobStatus,
    OneShotSpec,
    RepeatSpec,
)
from schedule_sdk.errors import InvalidConcurrency
from tests.support.waiting import HANG

pytestmark = pytest.mark.usefixtures("service_kind")


def at(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def one_shot(seconds: float, concurrency: object = None, topic: str = "tests.keyed") -> OneShotSpec:
    return OneShotSpec(topic=topic, run_at=at(seconds), timezone="UTC", concurrency=concurrency)  # type: ignore[arg-type]


def test_a_limit_is_stored_listed_and_read_back(backend):
    h = backend.harness()
    limit = ConcurrencyLimit(key="tenant-1:exports", limit=3)
    job = h.service.schedule_at(one_shot(60, limit))
    assert job.concurrency == limit
    assert h.service.get_by_id(job.id).concurrency == limit
    [listed] = h.service.list(topic="tests.keyed").items
    assert listed.concurrency == limit
    plain = h.service.schedule_at(one_shot(60, topic="tests.plain"))
    assert h.service.get_by_id(plain.id).concurrency is None


def _keyed(key: object, limit: object) -> OneShotSpec:
    return one_shot(60, ConcurrencyLimit(key=key, limit=limit))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "build",
    [
        lambda: _keyed("", 1),
        lambda: _keyed("a b", 1),
        lambda: _keyed("k" * 201, 1),
        lambda: _keyed("nul\x00", 1),
        lambda: _keyed(7, 1),
        lambda: _keyed("k", 0),
        lambda: _keyed("k", 10_001),
        lambda: _keyed("k", True),
        lambda: _keyed("k", "2"),
        lambda: one_shot(60, {"key": "k", "limit": 2}),
    ],
    ids=["empty", "space", "long", "nul", "not-text", "zero", "too-many", "bool", "text", "not-a-limit"],
)
def test_a_bad_limit_is_refused_with_a_typed_error_and_nothing_is_written(backend, build):
    h = backend.harness()
    with pytest.raises(InvalidConcurrency) as refused:
        h.service.schedule_at(build())
    assert refused.value.code == "SCHEDULE_INVALID_CONCURRENCY"
    assert h.service.list().items == []


def test_reschedule_changes_the_limit(backend):
    h = backend.harness()
    job = h.service.schedule_at(one_shot(60, ConcurrencyLimit(key="a", limit=1)))
    moved = h.service.reschedule(job.id, one_shot(60, ConcurrencyLimit(key="b", limit=4)))
    assert h.service.get_by_id(moved.id).concurrency == ConcurrencyLimit(key="b", limit=4)
    cleared = h.service.reschedule(moved.id, one_shot(60))
    assert h.service.get_by_id(cleared.id).concurrency is None


@pytest.mark.every_backend
def test_a_waiting_fire_starts_when_the_slot_frees_not_at_the_next_poll(backend):
    h = backend.harness(poll_interval=300.0).start()
    entered, release = threading.Event(), threading.Event()
    started: list[str] = []

    def slow(event) -> None:
        started.append(event.scheduled_job_id)
        entered.set()
        assert release.wait(HANG)

    h.listen("schedule.tests.keyed.arrived", slow)
    limit = ConcurrencyLimit(key="one-at-a-time", limit=1)
    first = h.schedule_soon(lambda lead: one_shot(lead, limit), 0.2)
    after_first = lambda lead: one_shot(max(lead, 0.1 + (first.run_at - at(0)).total_seconds()), limit)  # noqa: E731
    second = h.schedule_soon(after_first, 0.1)  # due 0.1 s after the first, or later
    assert entered.wait(HANG)
    h.wait_past(second.run_at)
    h.settle()
    assert started == [first.id] and h.job(second.id).status is JobStatus.PENDING  # waiting
    release.set()
    h.wait_status(second.id, "completed")  # the deadline (HANG) is far before the 300 s poll
    assert started == [first.id, second.id]


@pytest.mark.every_backend
def test_two_repeating_jobs_sharing_a_key_of_one_never_overlap(backend):
    h = backend.harness(poll_interval=30.0).start()
    running, most, fires = [0], [0], [0]
    lock = threading.Lock()

    def slow(event) -> None:
        with lock:
            running[0] += 1
            fires[0] += 1
            most[0] = max(most[0], running[0])
        threading.Event().wait(0.15)
        with lock:
            running[0] -= 1

    h.listen("schedule.tests.keyed.arrived", slow)
    limit = ConcurrencyLimit(key="ticker", limit=1)
    spec = RepeatSpec(
        topic="tests.keyed", timezone="UTC", repeat=IntervalRepeat(every_ms=100), limit=4, concurrency=limit
    )
    jobs = [h.service.schedule_repeat(spec) for _ in range(2)]
    for job in jobs:
        h.wait_status(job.id, "completed", timeout=20)
    assert fires[0] == 8 and most[0] == 1
