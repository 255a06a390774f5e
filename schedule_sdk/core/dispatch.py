"""``FireDispatcher``: runs claimed jobs on a bounded pool of listener threads and records their
outcomes in batches (one transaction for many fires when many are due at once).

It tracks every fire it holds (claimed, not yet recorded) so the worker can renew their leases,
and on stop it lets running fires finish within a timeout and releases the rest for another
worker, so nothing is lost.

A fire that runs past its time limit gives its listener thread back at the limit (its outcome,
``timeout``, is recorded and its claim no longer renewed); the sync listener still running is
left on a helper thread, *stuck* (see :mod:`~schedule_sdk.core.overruns`), so the pool keeps its
``concurrency`` threads for other jobs. While ``max_stuck`` helpers are stuck at once the
dispatcher takes no new jobs (its capacity is 0): the stuck threads are bounded, and the worker's
row and ``schedule-sdk health`` say why it no longer fires.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence

from schedule_sdk.core.firing import Firing, job_fields
from schedule_sdk.domain.backoff import retrying
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import Dispatcher, FireResult, JobStore

logger = logging.getLogger(__name__)

RECORD_BATCH = 500


class FireDispatcher(Dispatcher):
    def __init__(
        self,
        *,
        firing: Firing,
        store: JobStore,
        worker_id: str,
        concurrency: int = 8,
        max_in_flight: int = 2000,
        max_stuck: int | None = None,
    ) -> None:
        self._firing = firing
        self._store = store
        self.worker_id = worker_id
        self._concurrency = concurrency
        self._max_in_flight = max_in_flight
        #: Stuck listener threads (past their fire's time limit) at which no new job is taken
        #: (default: twice ``concurrency``).
        self.max_stuck = 2 * concurrency if max_stuck is None else max_stuck
        firing.overruns.on_unstuck = lambda: self.on_capacity()
        self._jobs: queue.SimpleQueue[ScheduledJob | None] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[FireResult | None] = queue.SimpleQueue()
        self._held: dict[str, ScheduledJob] = {}  # claimed and not yet recorded
        self._running: set[str] = set()
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._listeners = 0  # listener threads started (on demand: see submit)
        self._idle = threading.Semaphore(0)  # released by a listener thread done with a job
        self._recorder: threading.Thread | None = None
        self._stopping = False
        #: Called (from a recorder thread) whenever capacity frees up.
        self.on_capacity: Callable[[], None] = lambda: None
        #: Called with the jobs ``stop`` returned to pending, so a substrate whose queue entry was
        #: consumed (``rq``) can hand them over again.
        self.on_release: Callable[[list[ScheduledJob]], None] = lambda jobs: None
        #: Called by ``stop`` once the unfinished fires were released: abandon what still runs
        #: (the worker cancels async listeners still awaited, so their threads return).
        self.on_overdue: Callable[[], object] = lambda: None

    # -- pool --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start taking jobs. The listener threads and the recorder start with the first jobs
        submitted, one more whenever no started one is idle, up to ``concurrency``: a worker with
        nothing due runs none of them."""
        self._stopping = False

    def _grow(self, jobs: int) -> None:
        """Start listener threads for ``jobs`` new jobs, as far as idle ones do not take them."""
        if self._recorder is None:
            self._recorder = self._spawn(self._record_loop, "schedule-sdk-recorder")
        for _ in range(jobs):
            if self._listeners >= self._concurrency:
                return
            if not self._idle.acquire(blocking=False):
                self._spawn(self._work, f"schedule-sdk-listener-{self._listeners}")
                self._listeners += 1

    def _spawn(self, target: Callable[[], None], name: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)
        return thread

    def capacity(self) -> int:
        """How many more claimed jobs the dispatcher accepts now (none while stopping, or while
        :attr:`max_stuck` listener threads are stuck)."""
        if self.stuck() >= self.max_stuck:
            return 0
        with self._changed:
            return 0 if self._stopping else self._max_in_flight - len(self._held)

    def stuck(self) -> int:
        """How many listener threads still run a fire that timed out."""
        return self._firing.overruns.count()

    def held_ids(self) -> list[str]:
        with self._changed:
            return list(self._held)

    def submit(self, jobs: Sequence[ScheduledJob]) -> None:
        """Queue claimed jobs for firing (they must be claimed by ``worker_id``)."""
        with self._changed:
            for job in jobs:
                self._held[job.id] = job
            if self._listeners < self._concurrency:  # after that, nothing to count
                self._grow(len(jobs))
        self._firing.rereads.expect(jobs)  # read again in batches once due, if claimed ahead
        for job in jobs:
            self._jobs.put(job)

    def _work(self) -> None:
        first = True  # a thread starts for a job submitted: it is not idle until that one is done
        while True:
            if not first:
                self._idle.release()
            first = False
            job = self._jobs.get()
            if job is None:
                return
            with self._changed:
                if self._stopping:
                    continue  # released by stop()
                self._running.add(job.id)
            try:
                result = self._firing.run(job)
            except Exception:  # never lose the thread; the claim expires and the job fires again
                logger.exception("firing job %s crashed", job.id, extra=job_fields(job))
                self._forget([job.id])
                continue
            finally:
                with self._changed:
                    self._running.discard(job.id)
                    self._changed.notify_all()
            self._results.put(result)

    # -- recorder ----------------------------------------------------------------------------

    def _record_loop(self) -> None:
        done = False
        while not done:
            first = self._results.get()
            batch = [] if first is None else [first]
            done = first is None
            while len(batch) < RECORD_BATCH:
                try:
                    item = self._results.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    done = True
                    break
                batch.append(item)
            if batch:
                self._record(batch)

    def _record(self, batch: list[FireResult]) -> None:
        """Record ``batch``, retrying while the store fails; at stop one try is all it gets."""
        done = threading.Event()

        def record() -> float:
            try:
                self._firing.record(batch)
            except ScheduleError as error:
                if not self._stopping:
                    raise
                logger.error("could not record %d outcomes at stop (%s); they fire again", len(batch), error)
            done.set()
            return 0.0

        retrying(
            record,
            stop=done,
            wait=time.sleep,
            errors=(ScheduleError,),
            what=f"recording {len(batch)} outcomes",
            logger=logger,
        )
        self._forget([r.claimed.id for r in batch])

    def _forget(self, job_ids: list[str]) -> None:
        with self._changed:
            gone = [job for job_id in job_ids if (job := self._held.pop(job_id, None)) is not None]
            self._changed.notify_all()
        self._firing.rereads.forget(gone)
        self.on_capacity()

    # -- stop --------------------------------------------------------------------------------

    def stop(self, timeout: float) -> None:
        """Stop taking jobs; let running fires finish within ``timeout`` seconds; release the
        claims of everything else so another worker fires it."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._stopping = True
            self._changed.wait_for(lambda: not self._running, timeout=max(0.0, deadline - time.monotonic()))
            overdue = set(self._running)
        with self._changed:
            listeners, recorder = self._listeners, self._recorder
            self._listeners, self._recorder = 0, None
            self._idle = threading.Semaphore(0)
        for _ in range(listeners):
            self._jobs.put(None)
        if recorder is not None:
            self._results.put(None)
            recorder.join(timeout=max(0.5, deadline - time.monotonic()))
        with self._changed:
            unfinished = [j for j in self._held if j not in overdue] + sorted(overdue)
        self._release(unfinished)
        if overdue:
            self.on_overdue()
        # The idle threads end at once (each took a None); a thread still running an overdue fire
        # is not waited for: the whole join is bounded, not each thread's.
        joined = time.monotonic() + 0.2
        for thread in self._threads:
            thread.join(timeout=max(0.0, joined - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            logger.warning("listener threads still running after stop: %s", ", ".join(alive))
        self._threads.clear()

    def _release(self, job_ids: list[str]) -> None:
        if not job_ids:
            return
        with self._changed:
            jobs = [self._held[j] for j in job_ids if j in self._held]
        try:
            released = self._store.release_claims(self.worker_id, job_ids)
            logger.info("released %d unfinished fires for other workers", released)
            self.on_release(jobs)
        except ScheduleError as error:
            logger.warning(
                "could not release %d claims (%s); they fire again when the lease ends", len(job_ids), error
            )
        with self._changed:
            gone = [job for job_id in job_ids if (job := self._held.pop(job_id, None)) is not None]
        self._firing.rereads.forget(gone)
