"""Three small adapters, one per port, written the way docs/howto/custom-adapter.md describes.

``MeteredJobStore`` and ``MeteredExecutionQueue`` wrap another adapter and count calls (the shape
of a metrics or tracing adapter); ``JsonLinesEventPublisher`` appends every event to a file before
handing it to the listeners. ``MeteredJobStore`` declares two capabilities besides the JobStore
port: the worker registry (a worker needs it) and retention. tests/integration/examples/test_custom_adapter.py
runs the contract suites of those ports against ``MeteredJobStore`` and a worker with all three
adapters plugged into the container.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path

from dependency_injector import providers

from schedule_sdk import ListenerRegistry, ScheduleArrivedEvent, ScheduleContainer
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.domain.jobs import JobQuery, ScheduledJob
from schedule_sdk.ports import (
    EventPublisher,
    ExecutionQueue,
    JobStore,
    JobTransaction,
    Occurrence,
    OccurrenceRef,
    Retention,
    WorkerInfo,
    WorkerRegistry,
    require,
)


# --8<-- [start:store]
class MeteredJobStore(JobStore, WorkerRegistry, Retention):
    """Any JobStore with a worker registry and retention, with a count of calls per method.
    Every method keeps the inner store's contract. It inherits the capabilities it implements:
    ``WorkerRegistry`` (a worker refuses a store without one) and ``Retention``; being no
    ``FireHistory`` or ``JoinableStore``, it keeps no fire history and refuses ``connection=``."""

    def __init__(self, inner: JobStore) -> None:
        self._inner = inner
        self._registry = require(inner, WorkerRegistry, "MeteredJobStore")
        self._retention = require(inner, Retention, "MeteredJobStore")
        self.calls: Counter[str] = Counter()

    def transaction(self) -> AbstractContextManager[JobTransaction]:
        self.calls["transaction"] += 1
        return self._inner.transaction()

    def get(self, job_id: str) -> ScheduledJob | None:
        self.calls["get"] += 1
        return self._inner.get(job_id)

    def list_jobs(self, query: JobQuery) -> list[ScheduledJob]:
        self.calls["list_jobs"] += 1
        return self._inner.list_jobs(query)

    def claim_due(
        self, now: datetime, limit: int, worker_id: str, lease_until: datetime
    ) -> list[ScheduledJob]:
        self.calls["claim_due"] += 1
        return self._inner.claim_due(now, limit, worker_id, lease_until)

    def claim_many(
        self, occurrences: Sequence[OccurrenceRef], now: datetime, worker_id: str, lease_until: datetime
    ) -> list[ScheduledJob]:
        self.calls["claim_many"] += 1
        return self._inner.claim_many(occurrences, now, worker_id, lease_until)

    def extend_claims(self, worker_id: str, job_ids: Sequence[str], lease_until: datetime) -> None:
        self.calls["extend_claims"] += 1
        self._inner.extend_claims(worker_id, job_ids, lease_until)

    def release_claims(self, worker_id: str, job_ids: Sequence[str]) -> int:
        self.calls["release_claims"] += 1
        return self._inner.release_claims(worker_id, job_ids)

    def release_expired(self, now: datetime, limit: int) -> list[ScheduledJob]:
        self.calls["release_expired"] += 1
        return self._inner.release_expired(now, limit)

    def next_due_at(self, now: datetime | None = None) -> datetime | None:
        self.calls["next_due_at"] += 1
        return self._inner.next_due_at(now)

    def scan_open(self, after_id: str | None, limit: int) -> list[ScheduledJob]:
        self.calls["scan_open"] += 1
        return self._inner.scan_open(after_id, limit)

    def watch(
        self,
        on_change: Callable[[datetime | None], None],
        on_slot_freed: Callable[[], None] | None = None,
    ) -> Callable[[], None]:
        return self._inner.watch(on_change, on_slot_freed)

    def close(self) -> None:
        self._inner.close()

    # -- WorkerRegistry: every method abstract, so none can be forgotten -------------------------

    def beat(self, worker: WorkerInfo) -> None:
        self.calls["beat"] += 1
        self._registry.beat(worker)

    def workers(self) -> list[WorkerInfo]:
        return self._registry.workers()

    def remove_worker(self, worker_id: str) -> None:
        self._registry.remove_worker(worker_id)

    def release_dead(
        self, beat_before: datetime, also: Sequence[str], now: datetime, limit: int
    ) -> list[ScheduledJob]:
        self.calls["release_dead"] += 1
        return self._registry.release_dead(beat_before, also, now, limit)

    def forget_workers(self, beat_before: datetime) -> int:
        return self._registry.forget_workers(beat_before)

    def store_clock(self) -> datetime | None:
        return self._registry.store_clock()

    # -- Retention -------------------------------------------------------------------------------

    @property
    def one_writer(self) -> bool:
        return self._retention.one_writer

    def purge_finished(self, before: datetime, limit: int, *, wait: bool = False) -> int | None:
        self.calls["purge_finished"] += 1
        return self._retention.purge_finished(before, limit, wait=wait)


# --8<-- [end:store]


# --8<-- [start:queue]
class MeteredExecutionQueue(ExecutionQueue):
    """Any ExecutionQueue, with a count of the occurrences handed to each method."""

    def __init__(self, inner: ExecutionQueue) -> None:
        self._inner = inner
        self.name = f"metered-{inner.name}"
        self.calls: Counter[str] = Counter()

    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        self._inner.enqueue(occurrences)  # raises QueueUnavailable: the caller's transaction rolls back
        self.calls["enqueue"] += len(occurrences)

    def committed(self, occurrences: Sequence[Occurrence]) -> None:
        self.calls["committed"] += len(occurrences)
        self._inner.committed(occurrences)

    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        self.calls["withdraw"] += len(occurrences)
        self._inner.withdraw(occurrences)

    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        return self._inner.missing(occurrences)


# --8<-- [end:queue]


# --8<-- [start:publisher]
class JsonLinesEventPublisher(EventPublisher):
    """Appends each event to a JSON Lines file (an audit trail), then runs the listeners."""

    def __init__(self, path: Path, registry: ListenerRegistry) -> None:
        self._path = path
        self._registry = registry
        self._lock = threading.Lock()  # publish() is called from several worker threads

    def publish(self, event: ScheduleArrivedEvent) -> None:
        with self._lock, self._path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(event.to_dict()) + "\n")
        self._registry.deliver(event)  # runs every listener; raises ListenerFailed if any raised


# --8<-- [end:publisher]


# --8<-- [start:wire]
def use_custom_adapters(container: ScheduleContainer, events_file: Path) -> None:
    """Plug the three adapters into a container (before its first use)."""
    sql_store = providers.ThreadSafeSingleton(SQLAlchemyJobStore, engine=container.engine)
    container.store.override(providers.ThreadSafeSingleton(MeteredJobStore, inner=sql_store))
    container.queue.override(providers.ThreadSafeSingleton(MeteredExecutionQueue, inner=container.sql_queue))
    container.publisher.override(
        providers.ThreadSafeSingleton(JsonLinesEventPublisher, path=events_file, registry=container.listeners)
    )


# --8<-- [end:wire]
