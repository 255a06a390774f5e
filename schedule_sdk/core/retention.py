"""Retention: delete finished jobs (completed, cancelled, failed) some time after they finished,
and the fire history (entries and the per-minute summary) as long after it was written.

:class:`Purger` deletes in small batches (one short write transaction each, so fires are never
held up for long), one purger of jobs at a time across processes (``Retention.purge_finished``
holds the store's purge lock); the fire history too, when the store keeps one (a
``FireHistory``). A worker with ``retention`` set calls :meth:`Purger.tick` from its heartbeat:
each tick works for at most ``tick_budget`` seconds, finished jobs first, then the
fire history, and starts at most every ``interval`` seconds while nothing is left to delete.
Between batches it rests three times as long as the batch took (``duty`` 0.25). On a store with
one writer at a time (SQLite, ``Retention.one_writer``) a batch also fits before the next due
instant: it deletes at most as many rows as take half the time left (the time per row is learnt
from the batches), and when not even ``min_batch`` fits it waits for that instant to pass, so the
claim at a due instant never waits for a purge batch. A backlog (the next due instant more than
``overdue_grace`` past) does not hold the purge back. ``schedule-sdk jobs purge --older-than
30d`` runs :meth:`Purger.purge` and :meth:`Purger.purge_history` once, to the end. Open jobs
(pending, active, paused) are never touched.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import timedelta

from schedule_sdk.domain.errors import InvalidSetting
from schedule_sdk.domain.text import shown
from schedule_sdk.ports import Clock, FireHistory, JobStore, Retention, provided, require

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
            raise InvalidSetting(f"not a duration: {shown(text)} (use e.g. 30d, 12h, 90m, 45s or seconds)")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise InvalidSetting(f"a duration must be positive, not {shown(text)}")
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
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        #: What deletes finished jobs: the store, which must be a Retention (``StoreLacksCapability``).
        self._retention: Retention = require(store, Retention, "the purger (retention, jobs purge)")
        #: The fire history to purge too: the store's, when it keeps one.
        self._history = provided(store, FireHistory)
        self._clock = clock
        #: Where budgets, deadlines and rests are measured (seconds; only differences count) and how
        #: the purger waits: ``time.monotonic`` and ``time.sleep`` unless given. A test passes one
        #: virtual time line for these and ``clock`` (which gives the due instants' ``now``).
        self._monotonic = monotonic
        self._sleep = sleep
        self.retention = retention
        self._batch = batch_size
        self._interval = interval
        self._budget = tick_budget
        #: The share of time spent deleting: after a batch that took t seconds the purger rests
        #: t * (1 / duty - 1) seconds, so fires (SQLite's one writer, the CPU) are not held up.
        self._rest = 1.0 / duty - 1.0
        self._idle_until = 0.0
        self._fit = self._retention.one_writer
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
        return self._drain(lambda rows: self._retention.purge_finished(before, rows, wait=wait), progress)[0]

    def purge_history(self, older_than: timedelta, *, progress: Callable[[int], None] | None = None) -> int:
        """Delete the fire history written more than ``older_than`` ago (entries, then the rows of
        the store's per-minute summary); return how many rows (0 when the store keeps no fire
        history). ``progress`` as for :meth:`purge`."""
        history = self._history
        if history is None:
            return 0
        before = self._clock.now() - older_than
        return self._drain(lambda rows: history.purge_history(before, rows), progress)[0]

    def tick(self) -> int:
        """Some of the retention work (a worker's heartbeat calls this): finished jobs, then the
        fire history; how many rows were deleted."""
        if self.retention is None or self._monotonic() < self._idle_until:
            return 0
        before = self._clock.now() - self.retention
        deadline = self._monotonic() + self._budget
        jobs, done = self._drain(
            lambda rows: self._retention.purge_finished(before, rows, wait=False), deadline=deadline
        )
        fires, history = 0, self._history
        if done and history is not None:
            fires, done = self._drain(lambda rows: history.purge_history(before, rows), deadline=deadline)
        if done:  # all deleted, or another process purges: rest until the next interval
            self._idle_until = self._monotonic() + self._interval
        if jobs or fires:
            logger.info(
                "retention: purged %d finished jobs and %d fire history rows",
                jobs,
                fires,
                extra={"action": "purge", "purged": jobs, "purged_history": fires},
            )
        return jobs + fires

    def _drain(
        self,
        batch: Callable[[int], int | None],
        progress: Callable[[int], None] | None = None,
        *,
        deadline: float | None = None,
    ) -> tuple[int, bool]:
        """Run ``batch(rows)`` (one purge transaction of at most ``rows`` rows, as many as fit)
        until it deletes fewer than it was asked, returns None (another process holds the purge
        lock) or ``deadline`` (monotonic) passes; resting after each batch as ``duty`` says.
        Return the total deleted and whether it stopped for the first two reasons (nothing left
        here to do now)."""
        total = 0
        while deadline is None or self._monotonic() < deadline:
            asked = self._fitting_batch() if self._fit else self._batch
            started = self._monotonic()
            deleted = batch(asked)
            took = self._monotonic() - started
            if deleted is None:
                return total, True
            total += deleted
            if deleted:
                self._row_seconds = 0.7 * self._row_seconds + 0.3 * took / deleted
                self.on_purged(deleted)
                self._sleep(took * self._rest)
            if progress is not None:
                progress(total)
            if deleted < asked:
                return total, True
        return total, False

    def _fitting_batch(self) -> int:
        """How many rows the next batch may delete so that it ends well before the next due
        instant; waits (``max_wait`` at most) while not even ``min_batch`` would."""
        give_up = self._monotonic() + self._max_wait
        while True:
            due = self._store.next_due_at()
            if due is None:
                return self._batch
            left = (due - self._clock.now()).total_seconds()
            if left < -self._overdue_grace:
                return self._batch  # a backlog: fires are late anyway, retention goes on
            rows = int(max(left - _MARGIN, 0.0) / 2 / self._row_seconds)
            if rows >= self._min_batch or self._monotonic() >= give_up:
                return max(self._min_batch, min(self._batch, rows))
            self._sleep(min(max(left, 0.0) + _MARGIN, self._max_wait))


#: Seconds kept free before a due instant, and waited past it.
_MARGIN = 0.001
