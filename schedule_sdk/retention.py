"""Retention: delete finished jobs (completed, cancelled, failed) some time after they finished.

:class:`Purger` deletes in small batches (one short write transaction each, so fires are never
held up for long), one purger at a time across processes (``JobStore.purge_finished`` holds the
store's purge lock). A worker with ``retention`` set calls :meth:`Purger.tick` from its heartbeat:
each tick works for at most ``tick_budget`` seconds, and starts at most every ``interval``
seconds while nothing is left to delete. Between batches it rests three times as long as the
batch took (``duty`` 0.25), so a purge of a million rows does not show in fire lateness.
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
            deleted = self._batch_before(before, wait=wait)
            if deleted is None:
                break
            total += deleted
            if progress is not None:
                progress(total)
            if deleted < self._batch:
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
            deleted = self._batch_before(before, wait=False)
            total += deleted or 0
            if deleted is None or deleted < self._batch:  # another process purges, or all done
                self._idle_until = time.monotonic() + self._interval
                break
        if total:
            logger.info(
                "retention: purged %d finished jobs", total, extra={"action": "purge", "purged": total}
            )
        return total

    def _batch_before(self, before: datetime, *, wait: bool) -> int | None:
        started = time.monotonic()
        deleted = self._store.purge_finished(before, self._batch, wait=wait)
        if deleted:
            self.on_purged(deleted)
            time.sleep((time.monotonic() - started) * self._rest)
        return deleted
