"""The write order, once: how a row and its hand-off to the execution queue are written together.

1. open a store transaction and write the rows;
2. hand their occurrences to the queue *inside* it (``ExecutionQueue.enqueue``): a queue error
   rolls the rows back;
3. commit; if the commit (or anything after the hand-off) fails, withdraw what was handed over
   (``ExecutionQueue.withdraw``, the compensating removal; the reconciler heals anything left);
4. after the commit, ``ExecutionQueue.committed`` (the rq substrate activates its staged entries).

Scheduling (``service.py``), recording outcomes (``firing.py``) and the timer
(``timer/service.py``) write through :func:`write_order`; rows made pending again by a statement
of their own (the reconciler, a stopping rq worker) use :func:`hand_over_committed`.
See docs/explanation/write-order.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence

from schedule_sdk.ports import ExecutionQueue, JobStore, JobTransaction, Occurrence

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
def write_order(store: JobStore, queue: ExecutionQueue) -> Iterator[tuple[JobTransaction, HandOff]]:
    """A store transaction whose hand-offs follow the write order (see the module docstring)."""
    hand_off = HandOff(queue)
    try:
        with store.transaction() as tx:
            yield tx, hand_off
    except BaseException:
        if hand_off.occurrences:  # the commit failed after the queue accepted: compensate
            logger.warning(
                "commit failed after a hand-off; withdrawing %d entries", len(hand_off.occurrences)
            )
            queue.withdraw(hand_off.occurrences)
        raise
    queue.committed(hand_off.occurrences)


def hand_over_committed(queue: ExecutionQueue, occurrences: Sequence[Occurrence]) -> None:
    """Hand over occurrences of rows that are already committed pending (``enqueue`` then
    ``committed``; idempotent per occurrence key, so a repeat is harmless).

    :raises QueueUnavailable: not handed over; the reconciler tries again.
    """
    if occurrences:
        queue.enqueue(occurrences)
        queue.committed(occurrences)
