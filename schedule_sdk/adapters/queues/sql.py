"""The embedded ``sql`` substrate: the job store is the delay index.

``SQLExecutionQueue`` has nothing to hand over (the committed row *is* the queue entry); it only
wakes the local poller when an earlier job is scheduled. ``DuePoller`` sleeps until the next due
instant, is woken early by this process's commits and by other processes (PostgreSQL
``LISTEN/NOTIFY``, SQLite ``data_version``), re-reads at least every ``poll_interval`` as a safety
net, and claims due rows in batches. It never fires early: a row is claimed only when its
``run_at`` is at or before the process clock's now.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from ...dispatch import FireDispatcher
from ...domain.errors import ScheduleError
from ...ports import Clock, ExecutionQueue, JobStore, Occurrence

logger = logging.getLogger(__name__)

Wake = Callable[[datetime | None], None]


class SQLExecutionQueue(ExecutionQueue):
    name = "sql"

    def __init__(self) -> None:
        self._listeners: list[Wake] = []

    def subscribe(self, wake: Wake) -> Callable[[], None]:
        self._listeners.append(wake)
        return lambda: self._listeners.remove(wake)

    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        return None

    def committed(self, occurrences: Sequence[Occurrence]) -> None:
        if occurrences:
            earliest = min(o.due_at for o in occurrences)
            for wake in list(self._listeners):
                wake(earliest)

    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        return None

    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        return []


class DuePoller:
    """Claims due jobs at their due instant and hands them to the dispatcher."""

    def __init__(
        self,
        *,
        store: JobStore,
        queue: SQLExecutionQueue,
        dispatcher: FireDispatcher,
        clock: Clock,
        lease_seconds: float = 30.0,
        batch_size: int = 500,
        poll_interval: float = 1.0,
    ) -> None:
        self._store = store
        self._queue = queue
        self._dispatcher = dispatcher
        self._clock = clock
        self._lease = timedelta(seconds=lease_seconds)
        self._batch = batch_size
        self._poll = poll_interval
        self._wakeup = threading.Event()
        self._stop = threading.Event()
        self._planned: datetime | None = None
        self._thread: threading.Thread | None = None
        self._cleanups: list[Callable[[], None]] = []

    def wake(self, due_at: datetime | None = None) -> None:
        """Re-plan now, unless ``due_at`` is known to be no earlier than the planned wake-up."""
        planned = self._planned
        if due_at is None or planned is None or due_at < planned:
            self._wakeup.set()

    def start(self) -> None:
        self._stop.clear()
        self._dispatcher.on_capacity = self.wake
        self._cleanups = [self._queue.subscribe(self.wake), self._store.watch(self.wake)]
        self._thread = threading.Thread(target=self._run, name="schedule-sdk-poller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for cleanup in self._cleanups:
            cleanup()
        self._cleanups.clear()

    def _run(self) -> None:
        backoff = 0.05
        while not self._stop.is_set():
            try:
                timeout = self._cycle()
                backoff = 0.05
            except ScheduleError as error:
                logger.warning("poller: %s; retrying in %.2fs", error, backoff)
                timeout, backoff = backoff, min(backoff * 2, 5.0)
            if timeout > 0:
                self._wakeup.wait(timeout)

    def _cycle(self) -> float:
        """Claim what is due; return how long to sleep (0: go again at once)."""
        self._planned = None
        self._wakeup.clear()
        room = min(self._batch, self._dispatcher.capacity())
        if room > 0:
            now = self._clock.now()
            claimed = self._store.claim_due(now, room, self._dispatcher.worker_id, now + self._lease)
            if claimed:
                self._dispatcher.submit(claimed)
            if len(claimed) == room:
                return 0.0
        else:
            return self._poll  # the dispatcher wakes us when capacity frees up
        next_due = self._store.next_due_at()
        if next_due is None:
            return self._poll
        self._planned = next_due
        return max(0.0, min((next_due - self._clock.now()).total_seconds(), self._poll))
