"""``Reconciler``: heals the execution substrate from the store, the source of truth.

At worker start (and, optionally, on an interval) it returns expired claims to ``pending`` (a
worker died mid-fire: the job fires again), then scans every pending and active row and
re-enqueues those the substrate has no entry for; a past-due entry fires at once. Enqueueing is
idempotent per occurrence, and a fire starts only from a successful claim, so two reconcilers
running at once cannot double-fire an occurrence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from .domain.jobs import ScheduledJob
from .domain.status import JobStatus
from .ports import Clock, ExecutionQueue, JobStore, Occurrence

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    scanned: int = 0  #: pending and active rows examined
    healed: int = 0  #: entries re-enqueued because the substrate had lost them
    skipped: int = 0  #: rows whose entry was present (or which are firing now)
    released: int = 0  #: expired claims returned to pending

    def as_dict(self) -> dict[str, int]:
        return {
            "scanned": self.scanned,
            "healed": self.healed,
            "skipped": self.skipped,
            "released": self.released,
        }


class Reconciler:
    def __init__(
        self, *, store: JobStore, queue: ExecutionQueue, clock: Clock, batch_size: int = 1000
    ) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._batch = batch_size

    def release_expired(self) -> int:
        """Return expired claims to pending and hand them to the queue again; return how many."""
        total = self._hand_back(lambda: self._store.release_expired(self._clock.now(), self._batch))
        if total:
            logger.warning("released %d expired claims (a worker stopped mid-fire)", total)
        return total

    def release_dead(self, beat_before: datetime, also: Sequence[str] = ()) -> int:
        """Return the claims of registered workers that last beat before ``beat_before`` (or are in
        ``also``) to pending and hand them to the queue again (on ``rq`` their entries were
        consumed); return how many."""
        total = self._hand_back(
            lambda: self._store.release_dead(beat_before, also, self._clock.now(), self._batch)
        )
        if total:
            logger.warning("released %d claims of dead workers", total)
        return total

    def _hand_back(self, release: Callable[[], list[ScheduledJob]]) -> int:
        total = 0
        while released := release():
            occurrences = [Occurrence.of(j) for j in released]
            self._queue.enqueue(occurrences)
            self._queue.committed(occurrences)
            total += len(released)
            if len(released) < self._batch:
                break
        return total

    def run(self, progress: Callable[[ReconcileReport], None] | None = None) -> ReconcileReport:
        """Heal everything once; ``progress`` is called after each batch."""
        released = self.release_expired()
        scanned = healed = 0
        after: str | None = None
        while page := self._store.scan_open(after, self._batch):
            after = page[-1].id
            pending = [Occurrence.of(j) for j in page if j.status is JobStatus.PENDING]
            missing = self._queue.missing(pending)
            if missing:
                self._queue.enqueue(missing)
                self._queue.committed(missing)
            scanned += len(page)
            healed += len(missing)
            if progress is not None:
                progress(ReconcileReport(scanned, healed, scanned - healed, released))
            if len(page) < self._batch:
                break
        report = ReconcileReport(scanned, healed, scanned - healed, released)
        logger.info("reconciled %s", report.as_dict(), extra={"action": "reconcile", **report.as_dict()})
        return report
