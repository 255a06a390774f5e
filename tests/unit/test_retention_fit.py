"""Retention on a one-writer store (SQLite): purge batches fit between due instants.

The store here is a model: deleting a row takes 20 us (real time), jobs come due every 5 ms, and
each is claimed the moment it comes due (``next_due_at`` is the first instant still ahead). On
SQLite a claim waits for any write transaction in progress, so a batch that spans a due instant
would make that fire late.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from schedule_sdk.adapters.clock import SystemClock
from schedule_sdk.core.retention import Purger
from schedule_sdk.ports import JobStore
from schedule_sdk.testing import MemoryJobStore

ROW_SECONDS = 20e-6


class OneWriterModel(MemoryJobStore):
    one_writer = True

    def __init__(self, rows: int, dues: list[datetime]) -> None:
        super().__init__()
        self.rows = rows
        self.dues = dues
        self.batches: list[tuple[datetime, datetime, int]] = []  # start, end, rows asked

    def next_due_at(self) -> datetime | None:
        now = datetime.now(UTC)
        return next((due for due in self.dues if due > now), None)

    def purge_finished(self, before: datetime, limit: int, *, wait: bool = False) -> int | None:
        start = datetime.now(UTC)
        deleted = min(limit, self.rows)
        deadline = time.perf_counter() + deleted * ROW_SECONDS
        while time.perf_counter() < deadline:  # the write transaction, holding the one writer
            pass
        self.rows -= deleted
        self.batches.append((start, datetime.now(UTC), limit))
        return deleted


def purger(store: JobStore) -> Purger:
    return Purger(store=store, clock=SystemClock(), retention=timedelta(days=30), duty=0.5)


def test_batches_never_span_a_due_instant_and_the_purge_still_finishes() -> None:
    first = datetime.now(UTC) + timedelta(milliseconds=20)
    dues = [first + timedelta(milliseconds=5 * i) for i in range(200)]  # 1 s of fires at 200/s
    store = OneWriterModel(rows=20_000, dues=dues)

    purged = purger(store).purge(timedelta(days=30))

    assert purged == 20_000
    spanned = [(start, end) for start, end, _ in store.batches for due in dues if start < due <= end]
    assert spanned == []
    while_firing = [asked for start, _, asked in store.batches if first <= start < dues[-1]]
    assert while_firing and max(while_firing) < 500  # batches shrank to fit the 5 ms gaps


def test_with_nothing_due_or_a_backlog_batches_are_full_size() -> None:
    for dues in ([], [datetime.now(UTC) - timedelta(seconds=5)]):
        store = OneWriterModel(rows=2_000, dues=dues)
        store.next_due_at = lambda dues=dues: dues[0] if dues else None  # type: ignore[method-assign]
        assert purger(store).purge(timedelta(days=30)) == 2_000
        assert [asked for *_, asked in store.batches] == [500] * 5
