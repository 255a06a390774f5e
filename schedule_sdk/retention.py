"""Retention: delete finished jobs (completed, cancelled, failed) some time after they finished.

:class:`Purger` deletes in small batches (one short write transaction each, so fires are never
held up for long), one purger at a time across processes (``JobStore.purge_finished`` holds the
store's purge lock). A worker with ``retention`` set calls :meth:`Purger.tick` from its heartbeat:
each tick works for at most ``tick_budget`` seconds, and starts at most every ``interval``
seconds while nothing is left to delete. Between batches it rests three times as long as the
batch took (``duty`` 0.25). On a store with one writer at a time (SQLite, ``JobStore.one_writer``)
a batch also fits before the next due instant: it deletes at most as many rows as take half the
time left (the time per row is learnt from the batches), and when not even ``min_batch`` fits it
waits for that instant to pass, so the claim at a due instant never waits for a purge batch. A
backlog (the next due instant more than ``overdue_grace`` past) does not hold the purge back.
``schedule-sdk jobs purge --older-than 30d`` runs :meth:`Purger.purge` once, to the end. Open
jobs (pending, active, paused) are never touched.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from .domain.errors import InvalidSetting
from .ports import Clock, JobStore

logger = logging.getLogger(__name__)

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_duration(text: str | float) -> timedelta:
    """``'30d'``, ``'12h'``, ``'90m'``, ``'45s'``, ``'2w'`` or a number of seconds, as a timedelta.

    :raises InvalidSetting: anything else, or not positive.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        seconds = float(text)
    else:
        match = _DURATION.fullmatch(str(text))
        if match is None:
            raise InvalidSetting(f"not a duration: {text!r} (use e.g. 30d, 12h, 90m, 45s or seconds)")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise InvalidSetting(f"a duration must be positive, not {text!r}")
    return timedelta(seconds=seconds)


class Purger:
    """Deletes finished jobs older than a retention period, a batch at a time."""

    def __init__(
        self,
        *,
        store: JobStore,
        clock: Clock,
        retention: timedelta | None,
        batch_size: int = 500,
        interval: float = 60.0,
        tick_budget: float = 0.2,
        duty: float = 0.25,
        min_batch: int = 20,
        max_wait: float = 0.25,
        overdue_grace: float = 0.5,
    ) -> None:
        self._store = store
        self._clock = clock
        self.retention = retention
        self._batch = batch_size
        self._interval = interval
        self._budget = tick_budget
        #: The share of time spent deleting: after a batch that took t seconds the purger rests
        #: t * (1 / duty - 1) seconds, so fires (SQLite's one writer, the CPU) are not held up.
        self._rest = 1.0 / duty - 1.0
        self._idle_until = 0.0
        self._fit = store.one_writer
        self._min_batch = min(min_batch, batch_size)
        self._max_wait = max_wait
        self._overdue_grace = overdue_grace
        self._row_seconds = 10e-6  # learnt: the time one row takes (a moving average)
        #: Called with the number of rows each batch deleted (a metrics hook).
        self.on_purged: Callable[[int], None] = lambda count: None

    def purge(
        self, older_than: timedelta, *, wait: bool = True, progress: Callable[[int], None] | None = None
    ) -> int:
        """Delete every finished job that finished more than ``older_than`` ago; return how many.
        ``progress`` gets the running total after each batch. With ``wait`` (the default) it waits
        its turn when another process is purging; without, it stops there."""
        before = self._clock.now() - older_than
        total = 0
        while True:
            deleted, asked = self._batch_before(before, wait=wait)
            if deleted is None:
                break
            total += deleted
            if progress is not None:
                progress(total)
            if deleted < asked:
                break
        return total

    def tick(self) -> int:
        """Some of the retention work (a worker's heartbeat calls this); how many were deleted."""
        if self.retention is None or time.monotonic() < self._idle_until:
            return 0
        before = self._clock.now() - self.retention
        deadline = time.monotonic() + self._budget
        total = 0
        while time.monotonic() < deadline:
            deleted, asked = self._batch_before(before, wait=False)
            total += deleted or 0
            if deleted is None or deleted < asked:  # another process purges, or all done
                self._idle_until = time.monotonic() + self._interval
                break
        if total:
            logger.info(
                "retention: purged %d finished jobs", total, extra={"action": "purge", "purged": total}
            )
        return total

    def _batch_before(self, before: datetime, *, wait: bool) -> tuple[int | None, int]:
        """One batch: (how many it deleted, None if another process purges; how many it asked for)."""
        asked = self._fitting_batch() if self._fit else self._batch
        started = time.monotonic()
        deleted = self._store.purge_finished(before, asked, wait=wait)
        took = time.monotonic() - started
        if deleted:
            self._row_seconds = 0.7 * self._row_seconds + 0.3 * took / deleted
            self.on_purged(deleted)
            time.sleep(took * self._rest)
        return deleted, asked

    def _fitting_batch(self) -> int:
        """How many rows the next batch may delete so that it ends well before the next due
        instant; waits (``max_wait`` at most) while not even ``min_batch`` would."""
        give_up = time.monotonic() + self._max_wait
        while True:
            due = self._store.next_due_at()
            if due is None:
                return self._batch
            left = (due - self._clock.now()).total_seconds()
            if left < -self._overdue_grace:
                return self._batch  # a backlog: fires are late anyway, retention goes on
            rows = int(max(left - _MARGIN, 0.0) / 2 / self._row_seconds)
            if rows >= self._min_batch or time.monotonic() >= give_up:
                return max(self._min_batch, min(self._batch, rows))
            time.sleep(min(max(left, 0.0) + _MARGIN, self._max_wait))


#: Seconds kept free before a due instant, and waited past it.
_MARGIN = 0.001
