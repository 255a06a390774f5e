"""``Reconciler``: heals the execution substrate from the store, the source of truth.

At worker start (and, optionally, on an interval) it returns expired claims to ``pending`` (a
worker died mid-fire: the job fires again), then scans every pending and active row (their key
columns only) and re-enqueues those the substrate has no entry for; a past-due entry fires at
once. Enqueueing is idempotent per occurrence, and a fire starts only from a successful claim, so
two reconcilers running at once cannot double-fire an occurrence.

Between those runs, the worker's heartbeat calls :meth:`Reconciler.release_expired` and
:meth:`Reconciler.rescue`: the latter re-checks entries the substrate reports stranded for longer
than the lease (a process died between two steps of a hand-off) against their rows. It also calls
:meth:`Reconciler.heal_if_moved`, which runs the whole reconcile at once when the substrate's
server changed or lost its data (a Redis failover to a replica that lacked the latest writes, a
restart, a ``FLUSHDB``): the look is one round trip whatever the number of entries, and the heal
is this reconcile, noted for the health check and counted in ``schedule.entries.healed``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from schedule_sdk.core.write_order import hand_over_committed
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import (
    Clock,
    DueScan,
    ExecutionQueue,
    HealNote,
    JobStore,
    Metrics,
    Occurrence,
    OccurrenceRef,
    WorkerRegistry,
    provided,
    require,
)

logger = logging.getLogger(__name__)

#: How often a heal under way is noted for the health check (seconds).
NOTE_EVERY = 1.0
#: A reconcile hands over first the pending rows due within this many seconds (and past due).
DUE_FIRST = 60.0


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
        self,
        *,
        store: JobStore,
        queue: ExecutionQueue,
        clock: Clock,
        batch_size: int = 1000,
        lease_seconds: float = 30.0,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._batch = batch_size
        self._lease = lease_seconds
        self._metrics = metrics
        self._incarnation: str | None = None  #: the queue's incarnation at the last look
        self._loss_found: float | None = None  #: when a loss not healed yet was found (epoch s)

    def release_expired(self) -> int:
        """Return expired claims to pending and hand them to the queue again; return how many."""
        total = self._hand_back(lambda: self._store.release_expired(self._clock.now(), self._batch))
        if total:
            logger.warning("released %d expired claims (a worker stopped mid-fire)", total)
        return total

    def release_dead(
        self, beat_before: datetime, also: Sequence[str] = (), *, registry: WorkerRegistry | None = None
    ) -> int:
        """Return the claims of workers registered in ``registry`` (default: the store, which must
        then be a WorkerRegistry) that last beat before ``beat_before`` (or are in ``also``) to
        pending and hand them to the queue again (on ``rq`` their entries were consumed); return
        how many.

        :raises StoreLacksCapability: no ``registry``, and the store is no WorkerRegistry.
        """
        workers = registry if registry is not None else require(self._store, WorkerRegistry, "release_dead")
        total = self._hand_back(
            lambda: workers.release_dead(beat_before, also, self._clock.now(), self._batch)
        )
        if total:
            logger.warning("released %d claims of dead workers", total)
        return total

    def _hand_back(self, release: Callable[[], list[ScheduledJob]]) -> int:
        total = 0
        while released := release():
            hand_over_committed(self._queue, [Occurrence.of(j) for j in released])
            total += len(released)
            if len(released) < self._batch:
                break
        return total

    def rescue(self, older_than: float | None = None) -> int:
        """Hand over again each entry stranded for longer than ``older_than`` seconds (default:
        the lease) whose row is still pending at that occurrence and attempt; drop the others
        (their rows moved on, or a transaction that lasted longer than that wrote them: its
        ``committed`` adds them again). Return how many were handed over again.

        A shorter ``older_than`` is for the seconds after a worker was declared dead (see
        :data:`~schedule_sdk.core.liveness.DEAD_RESCUE_AGE`): an entry a live consumer holds is
        younger than that, and handing one over twice is harmless (a fire starts only from a
        claim of the pending row, so the second entry finds it taken and is dropped)."""
        age = self._lease if older_than is None else older_than
        stranded = self._queue.stranded(age)
        if not stranded:
            return 0
        again: list[Occurrence] = []
        moved_on: list[OccurrenceRef] = []
        for job_id, occurrence, attempt in stranded:
            row = self._store.get(job_id)
            if row is not None and row.pending_at(occurrence, attempt):
                again.append(Occurrence.of(row))
            else:
                moved_on.append((job_id, occurrence, attempt))
        self._queue.discard_stranded(moved_on, age)
        if again:
            hand_over_committed(self._queue, again)
            logger.warning("handed over %d stranded entries again (a process died mid-hand-off)", len(again))
        return len(again)

    def heal_if_moved(self) -> bool:
        """Reconcile at once (:meth:`run`) when the queue's
        :meth:`~schedule_sdk.ports.ExecutionQueue.incarnation` changed since the last look: the
        substrate failed over or restarted, or its data was deleted, and entries may be lost (an
        asynchronous replica had not received the latest, or all of them are gone). The first
        look only records it. True when it reconciled. The new incarnation counts as seen only
        once the run succeeded, so a failing run is tried again at the next look.

        The heal is noted for the health check and the peers
        (:meth:`~schedule_sdk.ports.ExecutionQueue.note_heal`): under way (at most every
        ``NOTE_EVERY`` seconds, with the entries handed over so far), then done, and each entry
        handed over again counts in ``schedule.entries.healed``. A worker that finds a peer's note
        of the same incarnation (:meth:`~schedule_sdk.ports.ExecutionQueue.heal_of`) does not heal
        it again: done, it takes the incarnation as seen; under way, it looks again at the next
        beat (and heals itself if the note aged out, its healer dead).

        :raises ScheduleUnavailable: the queue or the store did not answer.
        """
        now = self._queue.incarnation()
        seen = self._incarnation
        if now is None or now == seen:
            return False
        if seen is None:
            self._incarnation = now
            return False
        peer = self._queue.heal_of(now)
        if peer == "done":  # a peer healed this very loss, after it happened: nothing is left
            logger.info("a peer healed the loss the %s substrate's look found", self._queue.name)
            self._incarnation, self._loss_found = now, None
            return False
        if peer == "under way":  # a peer is healing it: look again at the next beat
            return False
        reason = self._queue.loss_reason(seen, now)
        logger.warning("%s: reconciling now to hand over again the entries it lost", reason)
        if self._loss_found is None:  # a heal that failed keeps the instant of the first look
            self._loss_found = time.time()
        lost_at, started = self._loss_found, time.monotonic()
        noted = [started]

        def progress(report: ReconcileReport) -> None:
            if time.monotonic() - noted[0] >= NOTE_EVERY:
                noted[0] = time.monotonic()
                self._queue.note_heal(
                    HealNote(lost_at, reason, report.healed, noted[0] - started, False, now)
                )

        self._queue.note_heal(HealNote(lost_at, reason, incarnation=now))
        report = self.run(progress)
        took = time.monotonic() - started
        self._queue.note_heal(HealNote(lost_at, reason, report.healed, took, True, now))
        logger.warning(
            "healed the loss found at %s: %d entries handed over again in %.2fs",
            datetime.fromtimestamp(lost_at, UTC).isoformat(timespec="milliseconds"),
            report.healed,
            took,
        )
        self._incarnation, self._loss_found = now, None
        return True

    def risks(self) -> list[str]:
        """How the queue's configuration could lose entries
        (:meth:`~schedule_sdk.ports.ExecutionQueue.risks`)."""
        return self._queue.risks()

    def run_at_start(self) -> None:
        """What a starting worker heals: everything (:meth:`run`) when the queue holds entries of
        its own; otherwise only expired claims (nothing can be missing, and reading every open row,
        a million of them, would hold back the first fires)."""
        if self._queue.holds_entries:
            self.run()
        else:
            self.release_expired()

    def run(self, progress: Callable[[ReconcileReport], None] | None = None) -> ReconcileReport:
        """Heal everything once; ``progress`` is called after each batch. The pending rows due
        within ``DUE_FIRST`` seconds (and those past due) go first, in due order, when the store
        reads them by due time (the :class:`~schedule_sdk.ports.DueScan` capability): after a
        loss of every entry the jobs about to fire are handed over in the first pages, not
        wherever their ids fall among a million. Then every open row, in id order (the rows of
        the first pass again: their entries are there now)."""
        released = self.release_expired()
        self.rescue()
        scanned = healed = 0
        until = self._clock.now() + timedelta(seconds=DUE_FIRST)
        cursor: tuple[datetime, str] | None = None
        due_scan = provided(self._store, DueScan)
        while due_scan is not None and (page := due_scan.scan_pending_due(until, cursor, self._batch)):
            cursor = (page[-1].occurrence.due_at, page[-1].occurrence.job_id)
            healed += self._heal([row.occurrence for row in page])
            if progress is not None:
                progress(ReconcileReport(scanned, healed, 0, released))
            if len(page) < self._batch:
                break
        after: str | None = None
        while page := self._store.scan_open_occurrences(after, self._batch):
            after = page[-1].occurrence.job_id
            healed += self._heal([row.occurrence for row in page if row.pending])
            scanned += len(page)
            if progress is not None:
                progress(ReconcileReport(scanned, healed, max(0, scanned - healed), released))
            if len(page) < self._batch:
                break
        report = ReconcileReport(scanned, healed, max(0, scanned - healed), released)
        logger.info("reconciled %s", report.as_dict(), extra={"action": "reconcile", **report.as_dict()})
        return report

    def _heal(self, pending: list[Occurrence]) -> int:
        """Hand over those of ``pending`` the queue has no entry for; return how many."""
        missing = self._queue.missing(pending)
        hand_over_committed(self._queue, missing)
        if missing and self._metrics is not None:
            self._metrics.increment("schedule.entries.healed", len(missing))
        return len(missing)
