"""What a starting worker heals: the full scan only where the queue holds entries of its own."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk.adapters.memory import MemoryJobStore
from schedule_sdk.adapters.metrics import InMemoryMetrics
from schedule_sdk.core.reconciler import Reconciler
from schedule_sdk.domain.errors import QueueUnavailable
from schedule_sdk.domain.ids import new_id
from schedule_sdk.domain.jobs import NO_RETRY, JobMetadata, ScheduledJob
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import HealNote, Occurrence
from schedule_sdk.substrates.inline import InlineExecutionQueue
from schedule_sdk.substrates.sql.queue import SQLExecutionQueue
from schedule_sdk.testing import FakeClock

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class CountingStore(MemoryJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.scans = 0

    def scan_open(self, after_id: str | None, limit: int) -> list[ScheduledJob]:
        self.scans += 1
        return super().scan_open(after_id, limit)


def job(**changes: object) -> ScheduledJob:
    values: dict[str, object] = {
        "id": new_id(),
        "topic": "t",
        "status": JobStatus.PENDING,
        "run_at": NOW + timedelta(hours=1),
        "scheduled_for": NOW + timedelta(hours=1),
        "timezone": "UTC",
        "payload": None,
        "metadata": JobMetadata(),
        "repeat": None,
        "retry": NO_RETRY,
        "created_at": NOW,
        "updated_at": NOW,
    }
    values.update(changes)
    return ScheduledJob(**values)  # type: ignore[arg-type]


def test_with_the_store_as_the_queue_a_start_releases_expired_claims_without_a_scan() -> None:
    store = CountingStore()
    expired = job(status=JobStatus.ACTIVE, claimed_by="dead", claimed_until=NOW - timedelta(seconds=1))
    with store.transaction() as tx:
        tx.insert_many([job(), expired])
    Reconciler(store=store, queue=SQLExecutionQueue(), clock=FakeClock(NOW)).run_at_start()
    assert store.scans == 0
    assert store.get(expired.id).status is JobStatus.PENDING  # type: ignore[union-attr]


def test_with_a_queue_of_its_own_a_start_hands_over_every_missing_entry() -> None:
    store, queue = CountingStore(), InlineExecutionQueue()
    pending = job()
    with store.transaction() as tx:
        tx.insert(pending)
    Reconciler(store=store, queue=queue, clock=FakeClock(NOW)).run_at_start()
    assert store.scans == 1
    assert [o.job_id for o in queue.history] == [pending.id]


class MovingQueue(InlineExecutionQueue):
    """A queue whose server can change (a failover), and whose lookups can fail."""

    def __init__(self) -> None:
        super().__init__()
        self.server: str | None = "a"
        self.failing = False

    def incarnation(self) -> str | None:
        return self.server

    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        if self.failing:
            raise QueueUnavailable("down")
        return super().missing(occurrences)


def test_a_changed_server_reconciles_at_once_and_a_failed_run_is_tried_again() -> None:
    store, queue = CountingStore(), MovingQueue()
    pending = job()
    with store.transaction() as tx:
        tx.insert(pending)
    reconciler = Reconciler(store=store, queue=queue, clock=FakeClock(NOW))
    assert reconciler.heal_if_moved() is False  # the first look only records the server
    assert reconciler.heal_if_moved() is False and store.scans == 0  # same server: nothing to do
    queue.server, queue.failing = "b", True
    with pytest.raises(QueueUnavailable):
        reconciler.heal_if_moved()
    queue.failing = False
    assert reconciler.heal_if_moved() is True  # the failed run counts as not done
    assert [o.job_id for o in queue.history] == [pending.id]
    assert reconciler.heal_if_moved() is False


def test_a_queue_without_servers_never_reconciles_on_its_own() -> None:
    store = CountingStore()
    reconciler = Reconciler(store=store, queue=SQLExecutionQueue(), clock=FakeClock(NOW))
    assert not reconciler.heal_if_moved() and not reconciler.heal_if_moved()
    assert store.scans == 0 and reconciler.risks() == []


class NotingQueue(MovingQueue):
    """A MovingQueue that keeps the heal notes it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[HealNote] = []

    def note_heal(self, note: HealNote) -> None:
        self.notes.append(note)


def test_a_heal_is_noted_under_way_then_done_and_its_entries_are_counted() -> None:
    store, queue, metrics = CountingStore(), NotingQueue(), InMemoryMetrics()
    pending = job()
    with store.transaction() as tx:
        tx.insert(pending)
    reconciler = Reconciler(store=store, queue=queue, clock=FakeClock(NOW), metrics=metrics)
    reconciler.heal_if_moved()
    queue.server, queue.failing = "b", True
    with pytest.raises(QueueUnavailable):
        reconciler.heal_if_moved()
    queue.failing = False
    assert reconciler.heal_if_moved() is True
    assert [(n.healed, n.done) for n in queue.notes] == [(0, False), (0, False), (1, True)]
    assert len({n.lost_at for n in queue.notes}) == 1  # the retry keeps the instant of the first look
    assert all("server changed" in n.reason for n in queue.notes)
    assert metrics.count("schedule.entries.healed") == 1
