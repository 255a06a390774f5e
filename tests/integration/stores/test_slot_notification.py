"""PostgreSQL: a freed concurrency slot is announced as ``slot`` (migration 0023), told apart from a
job becoming pending (whose notification carries its due instant), and the store's watch hands it
to ``on_slot_freed``."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import ConcurrencyLimit, OneShotSpec
from tests.conftest import Backend

pytestmark = pytest.mark.postgres


def test_a_freed_slot_is_announced_as_such_and_a_new_job_by_its_due_instant(postgres_sql: Backend) -> None:
    h = postgres_sql.harness()
    store = h.container.store()
    changes: list[datetime | None] = []
    slots = threading.Event()
    changed = threading.Event()

    def on_change(due_at: datetime | None) -> None:
        changes.append(due_at)
        changed.set()

    stop = store.watch(on_change, on_slot_freed=slots.set)
    try:
        # the first call (on connecting) reports "anything may have changed"
        assert changed.wait(10) and changes == [None]
        changed.clear()
        run_at = datetime.now(UTC) + timedelta(seconds=1)
        spec = OneShotSpec(
            topic="slots.job", run_at=run_at, timezone="UTC", concurrency=ConcurrencyLimit(key="k", limit=1)
        )
        job = h.service.schedule_at(spec)
        assert changed.wait(10) and changes[-1] == job.run_at  # pending: its due instant
        assert not slots.is_set()
        now = job.run_at + timedelta(seconds=1)
        [claimed] = store.claim_due(now, 10, "w1", now + timedelta(seconds=30))
        assert store.release_claims("w1", [claimed.id]) == 1  # active -> pending: the slot frees
        assert slots.wait(10), "the freed slot was not announced"
    finally:
        stop()
