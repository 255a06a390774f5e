"""The fire runtimes of the ``rq`` substrate: what happens to the occurrence keys of a released RQ
job (plain strings: the queue name and occurrence keys). For each key the runtime claims the
row (``JobStore.claim``: only a pending row at exactly this occurrence and attempt, already due,
can be claimed; inside a worker, due within :data:`~schedule_sdk.core.claim_timing.CLAIM_AHEAD`, and then held
by the fire path until due), so a stale, duplicated or early entry never fires a cancelled or
finished job and never fires early. Claimed jobs are fired:

- inside a ``schedule-sdk`` worker, the in-process consumer (``consumer.WorkerThread``) calls
  ``DispatchRuntime.take`` directly: claimed jobs go to the worker's
  :class:`~schedule_sdk.ports.Dispatcher` (listener pool, batched recording, lease renewal);
- inside a stock ``rq worker`` process, the RQ job function
  (:func:`schedule_sdk.entrypoints.rq_job.fire`) fires them synchronously through ``SyncRuntime``
  (the core's :class:`~schedule_sdk.ports.FirePath`), the ``rq_job_runtime`` of a container built
  once per process from the ``SCHEDULE_*`` environment.

Both see the delay index through the :class:`~schedule_sdk.ports.DelayIndex` port only.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Any

from schedule_sdk.core.claim_timing import claim_horizon, claim_lead, claim_time
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.leases import Lease
from schedule_sdk.ports import Clock, DelayIndex, Dispatcher, FirePath, JobStore
from schedule_sdk.substrates.rq.entries import parse_key

logger = logging.getLogger(__name__)

#: Seconds a process that may not claim (its clock is not known to be in step with the store's)
#: waits before it hands a released batch back: another worker takes it meanwhile.
REFUSED_PAUSE = 0.5


class FireRuntime:
    """Claims released occurrences (the part both runtimes share)."""

    def __init__(
        self, *, store: JobStore, queue: DelayIndex, clock: Clock, worker_id: str, lease_seconds: float
    ) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.worker_id = worker_id
        self.lease = Lease(lease_seconds)

    def store_seconds(self) -> float:
        """The store's clock as the claim reads it, in epoch seconds (what a released job is held
        by: this process's best estimate while it may not claim)."""
        now = claim_time(self.clock)
        return (self.clock.now() if now is None else now).timestamp()

    @property
    def ahead_ms(self) -> float:
        """How long before its due instant :meth:`claim` with ``ahead`` claims a row (ms):
        :data:`~schedule_sdk.core.claim_timing.CLAIM_AHEAD` on a real-time clock, else 0."""
        return claim_lead(self.clock).total_seconds() * 1000.0

    def claim(self, members: list[str], *, ahead: bool = False) -> list[ScheduledJob]:
        """Claim the rows of ``members`` (with ``ahead``, those due within
        :data:`~schedule_sdk.core.claim_timing.CLAIM_AHEAD` too:
        :func:`~schedule_sdk.core.claim_timing.claim_horizon`; the fire path holds them until
        due); re-enqueue those that are still pending at the same occurrence and attempt but could
        not be claimed (released before their due instant on this store's clock, or racing a
        commit); drop the released marks. While this process may not claim
        (:func:`~schedule_sdk.core.claim_timing.claim_time` is None: its offset from the store's
        clock is unknown or beyond its bound), it claims none of them and, after
        ``REFUSED_PAUSE`` seconds, re-enqueues them all for a worker that may."""
        now = claim_horizon(self.clock) if ahead else claim_time(self.clock)
        wanted: dict[tuple[str, int, int], str] = {}
        for member in members:
            parts = parse_key(member)
            if parts is None:
                logger.error("ignoring a malformed occurrence key %r", member[:100])
                continue
            wanted[parts] = member
        if now is None:
            time.sleep(REFUSED_PAUSE)
            self._retry_unclaimed([(member, *parts) for parts, member in wanted.items()], self.clock.now())
            return []
        claimed = self.store.claim_many(list(wanted), now, self.worker_id, self.lease.until(now))
        for job in claimed:
            wanted.pop((job.id, job.occurrence, job.attempt), None)
        if wanted:
            self._retry_unclaimed([(member, *parts) for parts, member in wanted.items()], now)
        return claimed

    def _retry_unclaimed(self, unclaimed: list[tuple[str, str, int, int]], now: datetime) -> None:
        again: list[tuple[str, float]] = []
        for member, job_id, occurrence, attempt in unclaimed:
            row = self.store.get(job_id)
            if row is None or not row.pending_at(occurrence, attempt):
                continue
            if row.concurrency is not None and row.run_at <= now:
                continue  # waiting for a slot of its key: the fire that frees one hands it over again
            again.append((member, row.run_at.timestamp() * 1000.0))
        if again:
            logger.info("%d released entries were not claimable yet; re-enqueued at due time", len(again))
            self.queue.activate(again)

    def drop_marks(self, members: list[str]) -> None:
        try:
            self.queue.done(members)
        except Exception as error:  # stale marks only make the reconciler look at pending rows
            logger.warning("could not clear %d released marks: %s", len(members), error)


class DispatchRuntime(FireRuntime):
    """In a ``schedule-sdk`` worker: the RQ consumer thread claims each released batch and passes
    the claimed jobs to the worker's dispatcher (its listener pool and batched recording)."""

    def __init__(self, *, dispatcher: Dispatcher, **kwargs: Any) -> None:
        super().__init__(worker_id=dispatcher.worker_id, **kwargs)
        self.dispatcher = dispatcher
        self.stopping = threading.Event()
        #: Every occurrence key of the consumer's current pop that is not claimed yet: their
        #: released marks are renewed while ``take`` waits for room, so none looks stranded.
        self.holding: list[str] = []

    def start(self) -> None:
        self.stopping.clear()

    def stop(self) -> None:
        self.stopping.set()

    def take(self, members: list[str]) -> bool:
        """Claim ``members`` and hand the claimed jobs to the dispatcher; True when their released
        marks are left to the caller to clear (the consumer clears them with its next pop), False
        when they were put back in the delay index instead."""
        touched = time.monotonic()
        while self.dispatcher.capacity() <= 0:  # back-pressure: wait for a free slot
            if self.stopping.is_set():
                break
            time.sleep(0.005)
            if time.monotonic() - touched >= min(1.0, self.lease.seconds / 3):
                touched = time.monotonic()
                self._touch()
        if self.stopping.is_set():
            self.queue.restore(members)  # another worker takes them
            return False
        # Claim here, in the RQ consumer thread: one statement per batch, cheaper than a
        # hand-off to another thread, which under a busy GIL costs milliseconds of lateness.
        try:
            claimed = self.claim(members, ahead=True)  # the dispatcher's fire path holds them until due
        except Exception as error:  # e.g. the store is down: hand them back for a later try
            logger.warning("could not claim %d released fires (%s); re-enqueued", len(members), error)
            time.sleep(0.5)
            self._restore(members)
            return False
        if claimed:
            self.dispatcher.submit(claimed)
        return True

    def _touch(self) -> None:
        try:
            self.queue.touch(self.holding)
        except ScheduleError as error:  # the marks only age: a duplicate release, claim-guarded
            logger.warning("could not renew %d released marks: %s", len(self.holding), error)

    def _restore(self, members: list[str]) -> None:
        try:
            self.queue.restore(members)
        except Exception as error:
            logger.warning("could not re-enqueue %d fires (%s); reconciler heals", len(members), error)


class SyncRuntime(FireRuntime):
    """In a stock ``rq worker`` process: fire the batch here and record it in one transaction."""

    def __init__(self, *, firing: FirePath, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.firing = firing

    def fire(self, members: list[str]) -> None:
        claimed = self.claim(members)
        self.drop_marks(members)
        if claimed:
            self.firing.record([self.firing.run(job) for job in claimed])
