"""The JobStore contract for retention (``purge_finished``) and for the paused status."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from schedule_sdk.adapters.stores.sqlalchemy import PURGE_LOCK_KEY, SQLAlchemyJobStore
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import JobStore

from .conftest import StoreFactory
from .jobs import NOW, at, ids, insert, job

FINISHED = (JobStatus.COMPLETED, JobStatus.CANCELLED, JobStatus.FAILED)
OPEN = (JobStatus.PENDING, JobStatus.ACTIVE, JobStatus.PAUSED)


def test_purge_deletes_only_finished_rows_older_than_the_cutoff(job_store: JobStore) -> None:
    old_finished = [job(status=s, updated_at=at(-3600 - i)) for i, s in enumerate(FINISHED)]
    old_open = [job(status=s, updated_at=at(-7200)) for s in OPEN]
    recent_finished = [job(status=s, updated_at=at(-10)) for s in FINISHED]
    insert(job_store, *old_finished, *old_open, *recent_finished)
    assert job_store.purge_finished(at(-60), 100) == 3
    for gone in old_finished:
        assert job_store.get(gone.id) is None
    for kept in old_open + recent_finished:
        assert job_store.get(kept.id) == kept


def test_purge_deletes_at_most_limit_rows_oldest_first(job_store: JobStore) -> None:
    rows = insert(job_store, *[job(status=JobStatus.COMPLETED, updated_at=at(-100 + i)) for i in range(7)])
    assert job_store.purge_finished(NOW, 3) == 3
    left = [r for r in rows if job_store.get(r.id) is not None]
    assert ids(left) == ids(rows[3:])
    assert job_store.purge_finished(NOW, 3) == 3
    assert job_store.purge_finished(NOW, 3) == 1
    assert job_store.purge_finished(NOW, 3) == 0


def test_the_cutoff_is_exclusive(job_store: JobStore) -> None:
    [row] = insert(job_store, job(status=JobStatus.FAILED, updated_at=at(-5)))
    assert job_store.purge_finished(at(-5), 10) == 0
    assert job_store.purge_finished(at(-5) + timedelta(microseconds=1), 10) == 1
    assert job_store.get(row.id) is None


def test_a_paused_row_roundtrips_and_is_never_claimed(job_store: JobStore) -> None:
    [paused] = insert(job_store, job(status=JobStatus.PAUSED, run_at=at(-10)))
    assert job_store.get(paused.id) == paused
    assert job_store.claim_due(NOW, 10, "w", at(30)) == []
    assert job_store.claim(paused.id, 1, 1, NOW, "w", at(30)) is None
    assert job_store.next_due_at() is None


@pytest.mark.postgres
@pytest.mark.parametrize("wait", [False, True], ids=["try", "wait"])
def test_one_purger_at_a_time_on_postgres(postgres_databases: Any, wait: bool) -> None:
    """While one transaction holds the purge lock, another purger gets None (try) or waits its
    turn (wait); it never deletes alongside. (SQLite and memory stores have one writer at a time.)"""
    factory = StoreFactory("postgres", postgres_databases.create("contracts"))
    try:
        first, other = factory.open(), factory.open()
        assert isinstance(first, SQLAlchemyJobStore)
        insert(first, *[job(status=JobStatus.COMPLETED, updated_at=at(-100)) for _ in range(4)])
        results: list[int | None] = []
        with first.engine.connect() as conn, conn.begin():
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": PURGE_LOCK_KEY})
            thread = threading.Thread(target=lambda: results.append(other.purge_finished(NOW, 10, wait=wait)))
            thread.start()
            thread.join(0.5)
            if wait:
                assert results == [] and thread.is_alive()  # waiting for the lock
            else:
                assert results == [None]
        thread.join(5)
        assert results == ([4] if wait else [None])
    finally:
        factory.close_all()
