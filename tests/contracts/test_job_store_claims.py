"""The JobStore contract (schedule_sdk/ports.py), part 2: claims, leases, the delay index, scans, watch."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime

import pytest

from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import JobStore

from .conftest import StoreFactory
from .jobs import NOW, at, ids, insert, job

ACTIVE, PENDING = JobStatus.ACTIVE, JobStatus.PENDING
CLOSED = (JobStatus.COMPLETED, JobStatus.CANCELLED, JobStatus.FAILED)


def held(by: str, until: datetime | None = None, **changes: object):
    return job(status=ACTIVE, claimed_by=by, claimed_until=until or at(30), **changes)


# -- claim_due ------------------------------------------------------------------------------------


def test_claim_due_claims_due_pending_rows_earliest_first_up_to_limit(job_store: JobStore) -> None:
    later, now_, earliest = insert(job_store, job(run_at=at(-1)), job(run_at=NOW), job(run_at=at(-60)))
    claimed = job_store.claim_due(NOW, 2, "w1", at(30))
    assert ids(claimed) == [earliest.id, later.id]
    assert ids(job_store.claim_due(NOW, 10, "w1", at(30))) == [now_.id]  # run_at == now is due
    assert job_store.claim_due(NOW, 10, "w1", at(30)) == []


def test_claim_due_moves_rows_to_active_and_returns_them_as_claimed(job_store: JobStore) -> None:
    j = insert(job_store, job(run_at=at(-5), occurrence=3, attempt=2))[0]
    (claimed,) = job_store.claim_due(NOW, 10, "worker-1", at(30))
    assert claimed == j.evolve(status=ACTIVE, claimed_by="worker-1", claimed_until=at(30), updated_at=NOW)
    assert job_store.get(j.id) == claimed


def test_claim_due_never_claims_rows_that_are_not_due_or_not_pending(job_store: JobStore) -> None:
    insert(
        job_store,
        job(run_at=at(0.000001)),
        held("w0", run_at=at(-10)),
        *(job(status=s, run_at=at(-10)) for s in CLOSED),
    )
    assert job_store.claim_due(NOW, 100, "w1", at(30)) == []


@pytest.mark.parametrize("round_", range(4))
def test_concurrent_claimers_never_claim_a_row_twice(
    job_store: JobStore, reopen: Callable[[], JobStore], round_: int
) -> None:
    jobs = insert(job_store, *(job(run_at=at(-(n % 17))) for n in range(120)))
    stores = [job_store, job_store, reopen(), reopen()]  # 2 threads per store, 2 stores (connections)
    barrier = threading.Barrier(len(stores))
    claims: Counter[str] = Counter()
    lock = threading.Lock()
    errors: list[BaseException] = []

    def claimer(store: JobStore, worker: str) -> None:
        try:
            barrier.wait()
            while batch := store.claim_due(NOW, 7, worker, at(30)):
                with lock:
                    claims.update((j.id, j.claimed_by) for j in batch)  # type: ignore[misc]
        except BaseException as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=claimer, args=(s, f"w{n}")) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    claimed_ids = Counter(job_id for job_id, _ in claims)
    assert sorted(claimed_ids) == sorted(ids(jobs))
    assert max(claimed_ids.values()) == 1, "a row was claimed twice"
    for job_id, worker in claims:
        row = job_store.get(job_id)
        assert row is not None and row.status is ACTIVE and row.claimed_by == worker


# -- claim ----------------------------------------------------------------------------------------


def test_claim_takes_a_due_pending_row_at_its_occurrence_and_attempt(job_store: JobStore) -> None:
    j = insert(job_store, job(run_at=at(-1), occurrence=2, attempt=3))[0]
    claimed = job_store.claim(j.id, 2, 3, NOW, "w1", at(30))
    assert claimed == j.evolve(status=ACTIVE, claimed_by="w1", claimed_until=at(30), updated_at=NOW)
    assert job_store.get(j.id) == claimed


@pytest.mark.parametrize(
    ("occurrence", "attempt", "now"),
    [(2, 2, NOW), (1, 3, NOW), (1, 1, NOW), (3, 1, NOW), (2, 3, at(-2))],
    ids=["attempt", "occurrence", "both", "later-occurrence", "not-due"],
)
def test_claim_returns_none_for_another_occurrence_or_attempt_or_before_due(
    job_store: JobStore, occurrence: int, attempt: int, now: datetime
) -> None:
    j = insert(job_store, job(run_at=at(-1), occurrence=2, attempt=3))[0]
    assert job_store.claim(j.id, occurrence, attempt, now, "w1", at(30)) is None
    assert job_store.get(j.id) == j


@pytest.mark.parametrize("status", [ACTIVE, *CLOSED])
def test_claim_returns_none_unless_the_row_is_pending(job_store: JobStore, status: JobStatus) -> None:
    j = insert(job_store, job(run_at=at(-1), status=status))[0]
    assert job_store.claim(j.id, 1, 1, NOW, "w1", at(30)) is None
    assert job_store.get(j.id) == j


def test_claim_of_an_unknown_job_is_none_and_a_second_claim_loses(job_store: JobStore) -> None:
    assert job_store.claim("01900000-0000-7000-8000-00000000dead", 1, 1, NOW, "w1", at(30)) is None
    j = insert(job_store, job())[0]
    assert job_store.claim(j.id, 1, 1, NOW, "w1", at(30)) is not None
    assert job_store.claim(j.id, 1, 1, NOW, "w2", at(30)) is None
    assert job_store.get(j.id).claimed_by == "w1"  # type: ignore[union-attr]


def test_claim_many_claims_exactly_the_matching_due_pending_occurrences(job_store: JobStore) -> None:
    due, other_attempt, not_due, done, also_due = insert(
        job_store,
        job(run_at=at(-3)),
        job(run_at=at(-2), attempt=2),
        job(run_at=at(5)),
        job(run_at=at(-1), status=JobStatus.COMPLETED),
        job(run_at=at(-1), occurrence=4),
    )
    asked = [
        (due.id, 1, 1),
        (other_attempt.id, 1, 1),  # the row is at attempt 2
        (not_due.id, 1, 1),
        (done.id, 1, 1),
        (also_due.id, 4, 1),
        (due.id, 1, 1),  # asked twice: claimed once
        ("01900000-0000-7000-8000-00000000dead", 1, 1),
    ]
    claimed = job_store.claim_many(asked, NOW, "w1", at(30))
    assert sorted(j.id for j in claimed) == sorted([due.id, also_due.id])
    assert all(j.status is ACTIVE and j.claimed_by == "w1" for j in claimed)
    assert job_store.get(other_attempt.id) == other_attempt and job_store.get(not_due.id) == not_due
    assert job_store.claim_many(asked, NOW, "w2", at(30)) == []
    assert job_store.claim_many([], NOW, "w2", at(30)) == []


def test_racing_claims_of_one_occurrence_have_exactly_one_winner(
    job_store: JobStore, reopen: Callable[[], JobStore]
) -> None:
    jobs = insert(job_store, *(job() for _ in range(20)))
    stores = [job_store, reopen()]
    wins: list[str] = []
    barrier = threading.Barrier(2)

    def claimer(store: JobStore, worker: str) -> None:
        barrier.wait()
        wins.extend(j.id for j in jobs if store.claim(j.id, 1, 1, NOW, worker, at(30)) is not None)

    threads = [threading.Thread(target=claimer, args=(s, f"w{n}")) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(wins) == sorted(ids(jobs))


# -- leases ---------------------------------------------------------------------------------------


def test_extend_claims_moves_only_this_workers_active_leases(job_store: JobStore) -> None:
    mine, other_worker, not_listed = insert(job_store, held("w1"), held("w2"), held("w1"))
    closed = insert(job_store, job(status=JobStatus.COMPLETED, claimed_by="w1", claimed_until=at(30)))[0]
    job_store.extend_claims("w1", [mine.id, other_worker.id, closed.id], at(90))
    job_store.extend_claims("w1", [], at(999))
    assert job_store.get(mine.id) == mine.evolve(claimed_until=at(90))
    for unchanged in (other_worker, not_listed, closed):
        assert job_store.get(unchanged.id) == unchanged


def test_release_claims_returns_this_workers_rows_to_pending_due_at_once(job_store: JobStore) -> None:
    a, b, other = insert(
        job_store,
        held("w1", run_at=at(-3), occurrence=4, attempt=2),
        held("w1", run_at=at(-2)),
        held("w2", run_at=at(-1)),
    )
    assert job_store.release_claims("w1", [a.id, b.id, other.id]) == 2
    assert job_store.release_claims("w1", []) == 0
    released = job_store.get(a.id)
    assert released is not None
    assert (released.status, released.occurrence, released.attempt) == (PENDING, 4, 2)
    assert released.claimed_by is None and released.claimed_until is None
    assert ids(job_store.claim_due(NOW, 10, "w3", at(30))) == [a.id, b.id]  # due at once
    assert job_store.get(other.id) == other
    assert job_store.release_claims("w1", [a.id]) == 0  # now claimed by w3


def test_release_expired_returns_rows_whose_lease_ended_before_now(job_store: JobStore) -> None:
    expired = insert(job_store, *(held(f"w{n}", until=at(-n - 1), occurrence=2, attempt=3) for n in range(3)))
    boundary, live = insert(job_store, held("w9", until=NOW), held("w9", until=at(1)))
    first = job_store.release_expired(NOW, 2)
    rest = job_store.release_expired(NOW, 10)
    assert len(first) == 2 and len(rest) == 1
    assert sorted(ids(first + rest)) == sorted(ids(expired))
    for j in first + rest:
        assert (j.status, j.occurrence, j.attempt) == (PENDING, 2, 3)
        assert j.claimed_by is None and j.claimed_until is None
        assert j.updated_at == NOW
        assert job_store.get(j.id) == j
    assert job_store.release_expired(NOW, 10) == []
    assert job_store.get(boundary.id) == boundary and job_store.get(live.id) == live


# -- next_due_at / scan_open ----------------------------------------------------------------------


def test_next_due_at_is_the_earliest_pending_run_at(job_store: JobStore) -> None:
    assert job_store.next_due_at() is None
    insert(job_store, held("w", run_at=at(-100)), job(status=JobStatus.CANCELLED, run_at=at(-50)))
    assert job_store.next_due_at() is None
    insert(job_store, job(run_at=at(20)), job(run_at=at(10)))
    assert job_store.next_due_at() == at(10)
    assert job_store.next_due_at().utcoffset().total_seconds() == 0  # type: ignore[union-attr]


def test_scan_open_pages_pending_and_active_rows_in_id_order(job_store: JobStore) -> None:
    rows = insert(job_store, *(job(status=[PENDING, ACTIVE, *CLOSED][n % 5]) for n in range(15)))
    open_ids = sorted(j.id for j in rows if j.status in (PENDING, ACTIVE))
    assert ids(job_store.scan_open(None, 100)) == open_ids
    assert ids(job_store.scan_open(None, 4)) == open_ids[:4]
    assert ids(job_store.scan_open(open_ids[3], 100)) == open_ids[4:]
    assert job_store.scan_open(open_ids[-1], 100) == []


# -- watch / close --------------------------------------------------------------------------------


def test_watch_returns_a_function_that_stops_watching(job_store: JobStore) -> None:
    calls: list[datetime | None] = []
    stop = job_store.watch(calls.append)
    stop()
    calls.clear()  # a watcher may report once as it starts ("anything sent while away")
    insert(job_store, job())  # after stop: must not raise, whatever the backend
    time.sleep(0.5)  # ten SQLite data_version polls, and PostgreSQL's notify round trip
    assert calls == []  # stopped: the schedule above is not reported


@pytest.mark.parametrize(
    "store_factory", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_sql_stores_watch_hears_another_process_schedule_a_job(store_factory: StoreFactory) -> None:
    watcher, writer = store_factory.open(), store_factory.open()
    heard = threading.Event()
    stop = watcher.watch(lambda due: heard.set())
    try:
        for _ in range(50):  # the watcher may take a moment to start listening
            insert(writer, job())
            if heard.wait(0.2):
                break
        assert heard.is_set()
    finally:
        stop()
