"""The fire path's reads of claimed-ahead jobs once due (``core.rereads.Rereads``): the first fire
to need its read reads every expected job due by then in one statement, the others take that
answer, a job due later than that read is read again later, and a cancel committed before a read
is seen by the job it answers for. The same rule end to end on every backend is
tests/integration/behaviour/test_steered_before_due.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from schedule_sdk.core.rereads import Rereads
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.status import OPEN_STATUSES, JobStatus
from schedule_sdk.ports import Guard
from schedule_sdk.testing import FakeClock, MemoryJobStore
from schedule_sdk.testing.contracts.rows import job

T0 = datetime(2030, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)


class _RealTimeFake(FakeClock):
    @property
    def real_time(self) -> bool:
        return True


class _Counting(MemoryJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads: list[list[str]] = []

    def still_claimed_many(self, jobs: Sequence[ScheduledJob]) -> list[bool]:
        self.reads.append([j.id for j in jobs])
        return super().still_claimed_many(jobs)


def _claimed(store: MemoryJobStore, *due: datetime) -> list[ScheduledJob]:
    rows = [job(run_at=at) for at in due]
    with store.transaction() as tx:
        tx.insert_many(rows)
    claimed = {j.id: j for j in store.claim_due(T0 + 10 * MS, 100, "w1", T0 + timedelta(seconds=30))}
    return [claimed[row.id] for row in rows]  # claimed 10 ms ahead of T0


def test_jobs_due_by_the_first_read_are_read_in_it_and_a_later_one_again_later():
    store = _Counting()
    rereads = Rereads(store, _RealTimeFake(T0))
    a, b, c, later = _claimed(store, T0, T0, T0 - MS, T0 + 5 * MS)
    rereads.expect([a, b, c, later])
    with store.transaction() as tx:  # committed before the read: the read sees it
        tx.update(
            b.evolve(status=JobStatus.CANCELLED, claimed_by=None, claimed_until=None), Guard(OPEN_STATUSES)
        )
    assert rereads.still_claimed(a, lambda: T0)
    assert store.reads == [[a.id, b.id, c.id]]  # one statement for the three due by T0
    assert not rereads.still_claimed(b, lambda: T0 + MS)
    assert rereads.still_claimed(c, lambda: T0 + MS)
    assert len(store.reads) == 1  # answered by the first read
    with store.transaction() as tx:  # committed before the later job's due instant
        tx.update(
            later.evolve(status=JobStatus.PAUSED, claimed_by=None, claimed_until=None), Guard(OPEN_STATUSES)
        )
    assert not rereads.still_claimed(later, lambda: T0 + 5 * MS)
    assert store.reads[1:] == [[later.id]]


def test_a_job_not_expected_or_forgotten_is_read_on_its_own_fire():
    store = _Counting()
    rereads = Rereads(store, _RealTimeFake(T0))
    a, b = _claimed(store, T0, T0)
    rereads.expect([a, b])
    rereads.forget([b])
    assert rereads.still_claimed(a, lambda: T0)
    assert rereads.still_claimed(b, lambda: T0)
    assert store.reads == [[a.id], [b.id]]
