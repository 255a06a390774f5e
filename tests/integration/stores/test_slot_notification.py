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


def test_the_listening_thread_sleeps_on_its_socket_relays_each_notification_and_ends_when_stopped(
    postgres_sql: Backend,
) -> None:
    h = postgres_sql.harness()
    store = h.container.store()
    changes: list[datetime | None] = []
    changed = threading.Condition()

    def on_change(due_at: datetime | None) -> None:
        with changed:
            changes.append(due_at)
            changed.notify_all()

    before = set(threading.enumerate())
    stop = store.watch(on_change)
    [listening] = [t for t in set(threading.enumerate()) - before if t.name == "schedule-sdk-pg-listen"]
    try:
        with changed:
            assert changed.wait_for(lambda: changes == [None], 10)
        run_at = datetime.now(UTC) + timedelta(hours=1)
        jobs = [
            h.service.schedule_at(
                OneShotSpec(topic="listen.job", run_at=run_at + timedelta(seconds=i), timezone="UTC")
            )
            for i in range(3)
        ]
        with changed:  # one wake-up of the thread may bring several: each is relayed
            assert changed.wait_for(lambda: len(changes) == 4, 10), changes
        assert changes[1:] == [j.run_at for j in jobs]
    finally:
        stop()
    # Stopping wakes the thread at once (it sleeps on the socket and a wake-up pipe, not on a timer
    # shorter than its stop's wait): it has ended when stop returns.
    assert not listening.is_alive()
