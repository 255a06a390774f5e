"""The write order, once: how a row and its hand-off to the execution queue are written together.

1. open a store transaction and write the rows;
2. hand their occurrences to the queue *inside* it (``ExecutionQueue.enqueue``): a queue error
   rolls the rows back;
3. commit; if the commit (or anything after the hand-off) fails, withdraw what was handed over
   (``ExecutionQueue.withdraw``, the compensating removal; the reconciler heals anything left);
4. after the commit, ``ExecutionQueue.committed`` (the rq substrate activates its staged entries).

Scheduling (``core/service.py``), recording outcomes (``core/firing.py``) and the timer
(``core/timers.py``) write through :func:`write_order`; rows made pending again by a statement
of their own (the reconciler, a stopping rq worker) use :func:`hand_over_committed`.

In the caller's transaction (``connection=``), :func:`joined_write_order` keeps the same promise
with the order the caller's commit allows: the occurrences are handed over first, staged (they
cannot fire before ``committed``), then the rows are written; ``committed`` runs after the caller
commits, ``withdraw`` if it rolls back.
See docs/explanation/write-order.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence

from schedule_sdk.ports import (
    ExecutionQueue,
    JobStore,
    JobTransaction,
    JoinableStore,
    JoinedTransaction,
    Occurrence,
)

logger = logging.getLogger(__name__)


class HandOff:
    """The occurrences handed to the queue inside one transaction."""

    def __init__(self, queue: ExecutionQueue) -> None:
        self._queue = queue
        self.occurrences: list[Occurrence] = []

    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        """Hand ``occurrences`` to the queue now (inside the transaction).

        :raises QueueUnavailable: nothing was handed over; the transaction rolls back.
        """
        if occurrences:
            self._queue.enqueue(occurrences)
            self.occurrences.extend(occurrences)


@contextlib.contextmanager
def write_order(
    store: JobStore, queue: ExecutionQueue, *, outcomes: bool = False
) -> Iterator[tuple[JobTransaction, HandOff]]:
    """A store transaction whose hand-offs follow the write order (see the module docstring);
    ``outcomes``: it records fires' outcomes (:meth:`JobStore.outcome_transaction`)."""
    hand_off = HandOff(queue)
    try:
        with store.outcome_transaction() if outcomes else store.transaction() as tx:
            yield tx, hand_off
    except BaseException:
        if hand_off.occurrences:  # the commit failed after the queue accepted: compensate
            logger.warning(
                "commit failed after a hand-off; withdrawing %d entries", len(hand_off.occurrences)
            )
            queue.withdraw(hand_off.occurrences)
        raise
    queue.committed(hand_off.occurrences)


class AfterCommit:
    """What a joined write withdraws once the caller has committed (the entries of rows it
    cancelled or replaced)."""

    def __init__(self) -> None:
        self.withdrawn: list[Occurrence] = []

    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        """Withdraw ``occurrences`` after the caller commits (nothing if it rolls back)."""
        self.withdrawn.extend(occurrences)


@contextlib.contextmanager
def joined_write_order(
    store: JoinableStore, queue: ExecutionQueue, connection: object, occurrences: Sequence[Occurrence]
) -> Iterator[tuple[JoinedTransaction, AfterCommit]]:
    """The caller's transaction on ``connection``, joined, in the write order (module docstring):
    ``occurrences`` are handed over (staged) before the rows are written, so a queue error leaves
    nothing in the caller's transaction.

    :raises QueueUnavailable: nothing was handed over or written.
    :raises TransactionNotJoinable: ``connection`` cannot be joined (nothing is left staged).
    """
    if occurrences:
        queue.enqueue(occurrences)
    after = AfterCommit()
    try:
        with store.join(connection) as joined:
            yield joined, after
            handed, withdrawn = list(occurrences), list(after.withdrawn)

            def committed() -> None:
                if handed:
                    queue.committed(handed)
                if withdrawn:
                    queue.withdraw(withdrawn)

            def rolled_back() -> None:
                if handed:
                    queue.withdraw(handed)

            joined.when_done(committed, rolled_back)
    except BaseException:
        if occurrences:
            queue.withdraw(occurrences)
        raise


def hand_over_committed(queue: ExecutionQueue, occurrences: Sequence[Occurrence]) -> None:
    """Hand over occurrences of rows that are already committed pending (``enqueue`` then
    ``committed``; idempotent per occurrence key, so a repeat is harmless).

    :raises QueueUnavailable: not handed over; the reconciler tries again.
    """
    if occurrences:
        queue.enqueue(occurrences)
        queue.committed(occurrences)
