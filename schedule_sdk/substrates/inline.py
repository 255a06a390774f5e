"""The ``inline`` substrate, for tests and scripts: no server, no threads, fires run when asked.

``InlineExecutionQueue`` keeps every occurrence handed to it (idempotent per key, like the RQ
queue); ``InlineRunner.run_due()`` claims what is due by the store and the clock, and fires each
job synchronously through the core's fire path (the :class:`~schedule_sdk.ports.FirePath` port):
the same retries, backoff, next occurrences and cancel-wins as a real worker.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from schedule_sdk.domain.leases import Lease
from schedule_sdk.ports import Clock, ExecutionQueue, FirePath, FireResult, JobStore, Occurrence


class InlineExecutionQueue(ExecutionQueue):
    """An in-memory execution queue that only records (``entries`` is what is queued now)."""

    name = "inline"

    def __init__(self) -> None:
        self._entries: dict[str, Occurrence] = {}
        self._lock = threading.Lock()
        #: Every occurrence ever handed over, in order (repeats included).
        self.history: list[Occurrence] = []

    @property
    def entries(self) -> list[Occurrence]:
        with self._lock:
            return sorted(self._entries.values(), key=lambda o: (o.due_at, o.key))

    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        with self._lock:
            for occurrence in occurrences:
                self._entries[occurrence.key] = occurrence
                self.history.append(occurrence)

    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        with self._lock:
            for occurrence in occurrences:
                self._entries.pop(occurrence.key, None)

    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        with self._lock:
            return [o for o in occurrences if o.key not in self._entries]


class InlineRunner:
    """Fires due jobs in the calling thread, on demand."""

    def __init__(
        self,
        *,
        store: JobStore,
        queue: InlineExecutionQueue,
        firing: FirePath,
        clock: Clock,
        worker_id: str = "inline",
        lease_seconds: float = 30.0,
        batch_size: int = 100,
    ) -> None:
        self._store = store
        self._queue = queue
        self._firing = firing
        self._clock = clock
        self.worker_id = worker_id
        self._lease = Lease(lease_seconds)
        self._batch = batch_size

    def run_due(self) -> list[FireResult]:
        """Fire every job due at the clock's now (earliest first) until none is due; return the fires.

        A retry or next occurrence that is due at once (a zero backoff) fires in the same call.
        """
        results: list[FireResult] = []
        while True:
            now = self._clock.now()
            claimed = self._store.claim_due(now, self._batch, self.worker_id, self._lease.until(now))
            if not claimed:
                return results
            for job in claimed:
                self._queue.withdraw([Occurrence.of(job)])
                results.append(self._firing.fire(job))

    def next_due_at(self) -> datetime | None:
        return self._store.next_due_at(self._clock.now())

    # A runner of ScheduleWorker: nothing runs in the background.
    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None
