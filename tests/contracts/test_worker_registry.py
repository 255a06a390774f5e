"""The JobStore contract (schedule_sdk/ports.py), part 3: the worker registry and dead workers' claims."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import JobStore, WorkerInfo

from .jobs import NOW, at, ids, insert, job

ACTIVE, PENDING = JobStatus.ACTIVE, JobStatus.PENDING


def worker(worker_id: str, beat: float = 0.0, **changes: object) -> WorkerInfo:
    values: dict[str, object] = {
        "id": worker_id,
        "host": "host-1",
        "pid": 4242,
        "substrate": "sql",
        "started_at": at(-3600),
        "last_beat": at(beat),
        "in_flight": 0,
        "node": "boot/pid:[1]",
    }
    values.update(changes)
    return WorkerInfo(**values)  # type: ignore[arg-type]


def held(by: str, **changes: object):
    return job(status=ACTIVE, claimed_by=by, claimed_until=at(30), run_at=at(-1), **changes)


def test_beat_registers_a_worker_then_updates_only_its_beat_and_in_flight(
    job_store: JobStore, reopen: Callable[[], JobStore]
) -> None:
    assert job_store.workers() == []
    first = worker("w1", node=None)
    job_store.beat(first)
    job_store.beat(worker("w0", beat=-5, in_flight=3))
    assert job_store.workers() == [worker("w0", beat=-5, in_flight=3), first]
    job_store.beat(replace(first, last_beat=at(1), in_flight=7, host="other", pid=1, started_at=at(0)))
    assert reopen().workers()[1] == replace(first, last_beat=at(1), in_flight=7)


def test_remove_worker_deletes_its_row_and_ignores_unknown_ids(job_store: JobStore) -> None:
    job_store.beat(worker("w1"))
    job_store.beat(worker("w2"))
    job_store.remove_worker("w1")
    job_store.remove_worker("nobody")
    assert [x.id for x in job_store.workers()] == ["w2"]


def test_release_dead_releases_active_claims_of_workers_whose_beat_is_too_old(job_store: JobStore) -> None:
    job_store.beat(worker("dead", beat=-11))
    job_store.beat(worker("live", beat=-1))
    dead_claims = insert(job_store, *(held("dead", occurrence=2, attempt=3) for _ in range(3)))
    live_claim, unregistered = insert(job_store, held("live"), held("stock-rq-worker"))
    finished = insert(job_store, job(status=JobStatus.COMPLETED, claimed_by="dead"))[0]
    first = job_store.release_dead(at(-10), [], NOW, 2)
    rest = job_store.release_dead(at(-10), [], NOW, 10)
    assert len(first) == 2 and len(rest) == 1
    assert sorted(ids(first + rest)) == sorted(ids(dead_claims))
    for j in first + rest:
        assert (j.status, j.occurrence, j.attempt) == (PENDING, 2, 3)
        assert j.claimed_by is None and j.claimed_until is None and j.updated_at == NOW
        assert job_store.get(j.id) == j
    assert job_store.release_dead(at(-10), [], NOW, 10) == []
    for untouched in (live_claim, unregistered, finished):
        assert job_store.get(untouched.id) == untouched
    assert [x.id for x in job_store.workers()] == ["dead", "live"]  # rows stay until forgotten


def test_release_dead_also_releases_the_named_workers_but_only_registered_ones(job_store: JobStore) -> None:
    job_store.beat(worker("gone", beat=0))
    gone, unregistered = insert(job_store, held("gone"), held("ghost"))
    released = job_store.release_dead(at(-10), ["gone", "ghost"], NOW, 10)
    assert ids(released) == [gone.id]
    assert job_store.get(unregistered.id) == unregistered


def test_a_worker_that_beats_again_keeps_its_claims(job_store: JobStore) -> None:
    job_store.beat(worker("w1", beat=-20))
    claim = insert(job_store, held("w1"))[0]
    job_store.beat(worker("w1", beat=0))  # resumed before anyone released it
    assert job_store.release_dead(at(-10), [], NOW, 10) == []
    assert job_store.get(claim.id) == claim


def test_forget_workers_deletes_rows_whose_beat_is_older_than_the_cutoff(job_store: JobStore) -> None:
    for n, beat in enumerate((-7200, -3601, -3600, 0)):
        job_store.beat(worker(f"w{n}", beat=beat))
    assert job_store.forget_workers(at(-3600)) == 2
    assert [x.id for x in job_store.workers()] == ["w2", "w3"]
    assert job_store.forget_workers(at(-3600)) == 0
