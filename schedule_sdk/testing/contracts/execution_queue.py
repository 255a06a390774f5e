"""The :class:`~schedule_sdk.ports.ExecutionQueue` contract, as tests any queue must pass.

::

    from schedule_sdk.testing.contracts.execution_queue import ExecutionQueueContract

    class TestMyQueue(ExecutionQueueContract):
        def open_queue(self):
            return MyExecutionQueue(...)    # a fresh, empty queue, once per test

Set ``holds_entries = False`` for a substrate whose delay index is the job store itself (like
``SQLExecutionQueue``: nothing is ever missing from it, since the row is the entry). Override
``close_queue`` to release what ``open_queue`` opened. Needs pytest only; no fixtures.
"""

from __future__ import annotations

from datetime import timedelta

from schedule_sdk.domain.ids import new_id
from schedule_sdk.ports import ExecutionQueue, Occurrence
from schedule_sdk.testing.contracts.rows import NOW


def occurrence(due_in: float = 3600.0, occurrence: int = 1, attempt: int = 1) -> Occurrence:
    """An occurrence of a new job id, due ``due_in`` seconds after the contract's fixed instant."""
    return Occurrence(new_id(), occurrence, attempt, NOW + timedelta(seconds=due_in))


class ExecutionQueueContract:
    #: False: the store is the delay index (``missing`` never reports anything).
    holds_entries: bool = True
    _queue: ExecutionQueue | None = None

    @property
    def queue(self) -> ExecutionQueue:
        """The current test's queue, opened by :meth:`open_queue` on first use."""
        if self._queue is None:
            self._queue = self.open_queue()
        return self._queue

    def open_queue(self) -> ExecutionQueue:
        raise NotImplementedError("a contract subclass returns its queue from open_queue()")

    def close_queue(self) -> None:
        """Release the queue (after each test that opened one)."""

    def setup_method(self, method: object) -> None:
        self._queue = None

    def teardown_method(self, method: object) -> None:
        if self._queue is not None:
            self.close_queue()
        self._queue = None

    def hand_over(self, *occurrences: Occurrence) -> list[Occurrence]:
        """What the write order does: ``enqueue`` inside the transaction, ``committed`` after it."""
        self.queue.enqueue(occurrences)
        self.queue.committed(occurrences)
        return list(occurrences)

    # -- the tests ---------------------------------------------------------------------------

    def test_the_queue_has_a_name(self) -> None:
        assert isinstance(self.queue.name, str) and self.queue.name

    def test_handed_over_occurrences_are_not_missing(self) -> None:
        near, far = self.hand_over(occurrence(due_in=-1), occurrence(due_in=86_400 * 30))
        assert self.queue.missing([near, far]) == []
        assert self.queue.missing([]) == []

    def test_missing_reports_exactly_the_occurrences_without_an_entry_in_their_order(self) -> None:
        held = self.hand_over(occurrence(), occurrence(attempt=2))
        never = [occurrence(), occurrence(occurrence=3)]
        asked = [never[0], held[0], never[1], held[1]]
        assert self.queue.missing(asked) == (never if self.holds_entries else [])

    def test_another_attempt_of_a_held_occurrence_is_its_own_entry(self) -> None:
        first = self.hand_over(occurrence(attempt=1))[0]
        retry = Occurrence(first.job_id, first.occurrence, 2, first.due_at)
        assert self.queue.missing([retry]) == ([retry] if self.holds_entries else [])

    def test_enqueueing_the_same_occurrence_twice_is_harmless(self) -> None:
        o = occurrence()
        self.hand_over(o)
        self.hand_over(o)
        assert self.queue.missing([o]) == []
        self.queue.withdraw([o])
        assert self.queue.missing([o]) == ([o] if self.holds_entries else [])

    def test_withdraw_removes_the_entries_and_leaves_the_others(self) -> None:
        gone, kept = self.hand_over(occurrence(), occurrence())
        self.queue.withdraw([gone])
        assert self.queue.missing([gone, kept]) == ([gone] if self.holds_entries else [])

    def test_withdraw_after_a_failed_commit_removes_an_entry_never_committed(self) -> None:
        o = occurrence(due_in=-1)
        self.queue.enqueue([o])  # the transaction's commit failed: no committed()
        self.queue.withdraw([o])
        assert self.queue.missing([o]) == ([o] if self.holds_entries else [])

    def test_withdraw_of_unknown_entries_never_raises(self) -> None:
        self.queue.withdraw([occurrence(), occurrence()])
        self.queue.withdraw([])

    def test_fresh_entries_are_not_stranded(self) -> None:
        held = self.hand_over(occurrence(due_in=-1), occurrence())
        stranded = self.queue.stranded(3600.0)
        assert not {(o.job_id, o.occurrence, o.attempt) for o in held} & set(stranded)
        self.queue.discard_stranded([(o.job_id, o.occurrence, o.attempt) for o in held], 3600.0)
        assert self.queue.missing(held) == []  # nothing fresh was discarded
