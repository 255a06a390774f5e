"""Retention on a one-writer store (SQLite): purge batches fit between due instants.

The store here is a model: deleting a row takes 20 us, jobs come due every 5 ms, and each is
claimed the moment it comes due (``next_due_at`` is the first instant still ahead). On SQLite a
claim waits for any write transaction in progress, so a batch that spans a due instant would make
that fire late.

All of it runs on one virtual time line (:class:`VirtualTime`): a batch advances it by the time
its rows take, the purger's rests and waits advance it, and the purger's monotonic reads and the
clock's ``now`` read it. Nothing sleeps and nothing depends on how fast the machine is.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schedule_sdk.core.retention import Purger
from schedule_sdk.testing import FakeClock, MemoryJobStore

ROW_SECONDS = 20e-6
START = datetime(2030, 1, 1, tzinfo=UTC)


class VirtualTime(FakeClock):
    """One time line: the wall clock (``now``), the seconds since it started (:meth:`monotonic`),
    and :meth:`sleep`, which moves it on by that much."""

    def __init__(self, start: datetime = START) -> None:
        super().__init__(start)
        self.start = start

    def monotonic(self) -> float:
        return (self.now() - self.start).total_seconds()

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)


class OneWriterModel(MemoryJobStore):
    one_writer = True

    def __init__(self, virtual: VirtualTime, rows: int, dues: list[datetime]) -> None:
        super().__init__()
        self.virtual = virtual
        self.rows = rows
        self.dues = dues
        self.batches: list[tuple[datetime, datetime, int]] = []  # start, end, rows asked

    def next_due_at(self, now: datetime | None = None) -> datetime | None:
        now = self.virtual.now()
        return next((due for due in self.dues if due > now), None)

    def purge_finished(self, before: datetime, limit: int, *, wait: bool = False) -> int | None:
        start = self.virtual.now()
        deleted = min(limit, self.rows)
        self.virtual.sleep(deleted * ROW_SECONDS)  # the write transaction, holding the one writer
        self.rows -= deleted
        self.batches.append((start, self.virtual.now(), limit))
        return deleted


def purger(store: OneWriterModel) -> Purger:
    virtual = store.virtual
    return Purger(
        store=store,
        clock=virtual,
        retention=timedelta(days=30),
        duty=0.5,
        monotonic=virtual.monotonic,
        sleep=virtual.sleep,
    )


def test_batches_never_span_a_due_instant_and_the_purge_still_finishes() -> None:
    virtual = VirtualTime()
    first = virtual.now() + timedelta(milliseconds=20)
    dues = [first + timedelta(milliseconds=5 * i) for i in range(200)]  # 1 s of fires at 200/s
    store = OneWriterModel(virtual, rows=20_000, dues=dues)

    purged = purger(store).purge(timedelta(days=30))

    assert purged == 20_000
    spanned = [(start, end) for start, end, _ in store.batches for due in dues if start < due <= end]
    assert spanned == []
    while_firing = [asked for start, _, asked in store.batches if first <= start < dues[-1]]
    assert while_firing and max(while_firing) < 500  # batches shrank to fit the 5 ms gaps


def test_with_nothing_due_or_a_backlog_batches_are_full_size() -> None:
    for dues in ([], [START - timedelta(seconds=5)]):
        store = OneWriterModel(VirtualTime(), rows=2_000, dues=dues)
        store.next_due_at = lambda dues=dues: dues[0] if dues else None  # type: ignore[method-assign]
        assert purger(store).purge(timedelta(days=30)) == 2_000
        assert [asked for *_, asked in store.batches] == [500] * 5
