"""Retention on PostgreSQL: one purger at a time across processes (the advisory lock)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa

from schedule_sdk.adapters.sql.retention import PURGE_LOCK_KEY
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import Retention, require

from .conftest import StoreFactory
from .jobs import NOW, at, insert, job


@pytest.mark.postgres
@pytest.mark.parametrize("wait", [False, True], ids=["try", "wait"])
def test_one_purger_at_a_time_on_postgres(postgres_databases: Any, wait: bool) -> None:
    """While one transaction holds the purge lock, another purger gets None (try) or waits its
    turn (wait); it never deletes alongside. (SQLite and memory stores have one writer at a time.)"""
    factory = StoreFactory("postgres", postgres_databases.create("contracts"))
    try:
        first, other = factory.open(), factory.open()
        purger = require(other, Retention, "the test")
        assert isinstance(first, SQLAlchemyJobStore)
        insert(first, *[job(status=JobStatus.COMPLETED, updated_at=at(-100)) for _ in range(4)])
        results: list[int | None] = []
        with first.engine.connect() as conn, conn.begin():
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": PURGE_LOCK_KEY})
            purge = lambda: results.append(purger.purge_finished(NOW, 10, wait=wait))  # noqa: E731
            thread = threading.Thread(target=purge)
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
