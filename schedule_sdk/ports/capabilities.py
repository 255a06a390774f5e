"""What a store may add to :class:`~schedule_sdk.ports.store.JobStore`, one class per capability.

A store provides a capability by implementing it itself or by composing an object that does
(:meth:`JobStore.capability`); code that needs one asks with :func:`require` (which raises
:class:`StoreLacksCapability`) or :func:`provided` (which answers None), never with ``isinstance``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar, cast

from schedule_sdk.domain.declared import StoredDeclaration
from schedule_sdk.domain.errors import StoreLacksCapability
from schedule_sdk.domain.history import FireRecord
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.overview import JobSearch, Overview, SeenWorker
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.timers import TimerEntry, TimerState
from schedule_sdk.ports.store import JobStore, JobTransaction, JoinedTransaction, OpenOccurrence


class DueScan(ABC):
    """Capability: the pending rows about to fire, read by due time through an index. A heal of
    lost entries (the reconciler) hands them over first; without it, it scans in id order only."""

    @abstractmethod
    def scan_pending_due(
        self, until: datetime, after: tuple[datetime, str] | None, limit: int
    ) -> list[OpenOccurrence]:
        """Up to ``limit`` pending rows due at or before ``until``, in ``(run_at, id)`` order,
        after the row ``after`` (its ``run_at`` and id), each as its occurrence (pending)."""


class JoinableStore(ABC):
    """Capability: writing in the caller's own open transaction (``connection=`` of the service).
    A store without it refuses ``connection=`` with ``TransactionNotJoinable``."""

    @abstractmethod
    def join(self, connection: object) -> AbstractContextManager[JoinedTransaction]:
        """Write in the caller's open transaction on ``connection``: what is written becomes
        visible to others only when the caller commits, and nothing of it remains if the caller
        rolls back. Leaving the block (even with an exception) neither commits nor rolls back.

        :raises TransactionNotJoinable: this store cannot write through ``connection``.
        """


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker's row in the registry: who it is, where it runs, when it last beat, and how
    many fires it held (claimed, not yet recorded) at that beat. ``node`` names the kernel and
    PID namespace ``pid`` belongs to (None when unknown), so a worker on the same node can tell
    that a registered process no longer exists."""

    id: str
    host: str
    pid: int
    substrate: str
    started_at: datetime
    last_beat: datetime
    in_flight: int = 0
    node: str | None = None
    #: How many of its listener threads still ran a fire that had timed out, at that beat (a
    #: worker with stuck threads is degraded: ``schedule-sdk health`` says so).
    stuck: int = 0
    #: Seconds to add to this worker's own clock to read the store's clock, as measured at its
    #: last beat, and that measurement's error bound (half its round trip); None: not measured.
    clock_offset: float | None = None
    clock_error: float | None = None


class WorkerRegistry(ABC):
    """Capability: the worker registry, which dead-worker detection needs. Every worker beats its
    row; a worker whose beat stops has its claims released by its peers well before its leases
    end. A worker (``container.worker()``) and the health check need it."""

    @abstractmethod
    def beat(self, worker: WorkerInfo) -> None:
        """Insert or update ``worker``'s registry row, keyed by ``worker.id``: a new row takes
        every field; an existing row takes ``last_beat``, ``in_flight``, ``stuck``,
        ``clock_offset`` and ``clock_error`` only."""

    @abstractmethod
    def store_clock(self) -> datetime | None:
        """The store's own clock, read now (one round trip: PostgreSQL's ``clock_timestamp()``),
        or None when the store has no clock of its own and its time is this machine's (SQLite, an
        in-memory store): the offset is then 0 by definition."""

    @abstractmethod
    def workers(self) -> list[WorkerInfo]:
        """Every registered worker, in id order."""

    @abstractmethod
    def remove_worker(self, worker_id: str) -> None:
        """Delete this worker's registry row (a clean stop); no error when absent."""

    @abstractmethod
    def release_dead(
        self, beat_before: datetime, also: Sequence[str], now: datetime, limit: int
    ) -> list[ScheduledJob]:
        """Return to ``pending`` (same occurrence and attempt) up to ``limit`` active jobs claimed
        by a *registered* worker whose last beat is before ``beat_before`` or whose id is in
        ``also``, deciding in one statement (a worker that beats meanwhile keeps its claims);
        return them as released. Claims of workers absent from the registry are left to leases.
        A store whose sessions can outlive their process (a server database: a paused process's
        open transaction keeps its row locks) ends those of the dead workers first, so no claim
        stays locked out of the release (the SQL store does on PostgreSQL)."""

    @abstractmethod
    def forget_workers(self, beat_before: datetime) -> int:
        """Delete registry rows whose last beat is before ``beat_before``; return how many."""


class FireHistory(ABC):
    """Capability: the fire history, one entry per fire, kept until purged. A store without it
    keeps none: fires are not recorded and ``ScheduleService.history`` returns no entries."""

    @abstractmethod
    def record_fires(self, tx: JobTransaction, fires: Sequence[FireRecord]) -> None:
        """Append ``fires`` to the history inside ``tx`` (a transaction of this store), so a
        fire's entry commits or rolls back with its outcome, and to any summary the store keeps
        of it (the SQL store's per-minute counts, which the dashboard reads). Called on the fire
        path: keep it to a few statements per call.

        :raises TypeError: ``tx`` is not a transaction of this store.
        """

    @abstractmethod
    def history(self, job_id: str, limit: int, before: datetime | None = None) -> list[FireRecord]:
        """Up to ``limit`` fire history entries of job ``job_id``, newest first (by ``fired_at``),
        only those fired before ``before`` when given (the next page). Entries outlive their job
        until purged."""

    @abstractmethod
    def purge_history(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` rows of fire history fired before ``before``, oldest first, in
        one transaction; return how many. Rows are entries and, once no entry before ``before``
        is left, the rows of any summary the store keeps of whole minutes before ``before``. The
        retention purger calls it until it returns less than ``limit``: then nothing before
        ``before`` is left."""


class Retention(ABC):
    """Capability: deleting finished jobs, which the ``retention`` setting and
    ``schedule-sdk jobs purge`` need. (A store that also is a :class:`FireHistory` has its
    history purged by the same purger.)"""

    @property
    @abstractmethod
    def one_writer(self) -> bool:
        """True when one write transaction excludes every other (SQLite): a long write then delays
        the claim of a job that comes due meanwhile, so the purger fits its batches between due
        instants."""

    @abstractmethod
    def purge_finished(self, before: datetime, limit: int, *, wait: bool = False) -> int | None:
        """Delete up to ``limit`` finished jobs (completed, cancelled or failed) whose last change
        (``updated_at``) is before ``before``, oldest first, in one transaction; return how many.
        Open jobs (pending, active, paused) are never deleted. One purger runs at a time across
        processes: when another holds the purge lock, return None at once (or, with ``wait``,
        wait for it)."""


class OperatorReads(ABC):
    """What an operator's views read beyond the job store's own calls: capped counts, the
    overview of fires and lateness, the workers seen, and timers by tenant. Every read is bounded
    (counts stop at :data:`~schedule_sdk.domain.overview.COUNT_CAP`).

    :raises StoreUnavailable: the database is unreachable or failed.
    """

    @abstractmethod
    def count_jobs(self, status: JobStatus | None = None, **equal: str | None) -> int:
        """Jobs in ``status`` (any, if None) whose columns equal the non-None ``equal`` values
        (``topic``, ``owner_id``, ``tenant_id``), counted up to ``COUNT_CAP + 1`` (to tell "more")."""

    @abstractmethod
    def status_counts(self) -> dict[JobStatus, int]:
        """:meth:`count_jobs` for every status."""

    @abstractmethod
    def overview(self, now: datetime, minutes: int = 60) -> Overview:
        """Fires, failures and lateness percentiles per bucket, and failures by topic, in the
        window of ``minutes`` (a key of :data:`~schedule_sdk.domain.overview.WINDOWS`) ending at
        ``now``, made of whole buckets (skipped occurrences are not fires)."""

    @abstractmethod
    def unheard(self, now: datetime, minutes: int = 60) -> list[tuple[str, int]]:
        """The topics of fires no listener heard in the last ``minutes`` before ``now``, with
        their counts, most first (at most 20 topics)."""

    @abstractmethod
    def workers_seen(self, now: datetime, minutes: int = 60) -> list[SeenWorker]:
        """Workers that fired in the last ``minutes`` or hold a claim now, most recent first."""

    @abstractmethod
    def timer_tenants(self, limit: int = 50, after: str | None = None) -> list[str]:
        """Up to ``limit`` tenants that have timers, in order, after ``after``."""

    @abstractmethod
    def timers(
        self, tenant_id: str, state: TimerState, limit: int, after: tuple[datetime, str] | None = None
    ) -> list[TimerEntry]:
        """One tenant's timers in ``state`` by due time, keyset-paged after ``(due_at, service_call_id)``."""

    @abstractmethod
    def count_timers(self, tenant_id: str, state: TimerState) -> int:
        """One tenant's timers in ``state``, counted up to ``COUNT_CAP + 1``."""

    @abstractmethod
    def search_jobs(self, search: JobSearch) -> list[ScheduledJob]:
        """A page of up to ``search.limit`` jobs matching ``search``, in its order (keyset after
        ``search.after``). Bounded: a payload text search or an order no index serves reads at
        most :data:`~schedule_sdk.domain.overview.SEARCH_WINDOW` candidate rows, newest first."""

    @abstractmethod
    def count_search(self, search: JobSearch) -> int:
        """The jobs matching ``search`` (its order and position aside), counted up to
        ``COUNT_CAP + 1``."""


class DeclaredRows(ABC):
    """Where the store keeps the schedules declared in code: one :class:`StoredDeclaration` per
    name, whose ``job_id`` marks that job as code-owned. Writes run in a job store transaction
    (``tx``), so a declaration and its job commit or roll back together."""

    @abstractmethod
    def lock(self, tx: JobTransaction) -> None:
        """Hold the sync lock until ``tx`` ends: one sync at a time across every process on the
        store (a second one waits, then sees what the first wrote)."""

    @abstractmethod
    def rows(self, tx: JobTransaction) -> list[tuple[StoredDeclaration, ScheduledJob | None]]:
        """Every stored declaration with its job (None if the job is gone), ordered by name."""

    @abstractmethod
    def put(self, tx: JobTransaction, rows: Sequence[StoredDeclaration]) -> None:
        """Insert or replace the declarations of these names."""

    @abstractmethod
    def read(self) -> list[tuple[StoredDeclaration, ScheduledJob | None]]:
        """:meth:`rows` outside a sync (a snapshot, no lock)."""


_Capability = TypeVar("_Capability")


def provided(store: object, capability: Callable[..., _Capability]) -> _Capability | None:
    """``store``'s implementation of ``capability`` (one of :data:`CAPABILITIES`, an abstract class:
    hence typed as a callable, which mypy accepts): :meth:`JobStore.capability` for a job store,
    else ``store`` itself if it inherits ``capability``; None when it has none."""
    port = cast(type, capability)
    found = store.capability(port) if isinstance(store, JobStore) else store
    return cast(_Capability, found) if isinstance(found, port) else None


def require(store: object, capability: Callable[..., _Capability], needed_by: str) -> _Capability:
    """``store``'s implementation of ``capability`` (one of :data:`CAPABILITIES`, an abstract class:
    hence typed as a callable, which mypy accepts), or refuse, naming ``needed_by``: what needs it.

    :raises StoreLacksCapability: ``store`` does not provide ``capability`` (:func:`provided`).
    """
    found = provided(store, capability)
    if found is not None:
        return found
    raise StoreLacksCapability(type(store).__name__, cast(type, capability).__name__, needed_by)


#: The capabilities a store may add to :class:`~schedule_sdk.ports.store.JobStore`; a store
#: provides each by inheriting it or by composing an object that does (``JobStore.capability``).
CAPABILITIES: tuple[type, ...] = (
    JoinableStore,
    DueScan,
    WorkerRegistry,
    FireHistory,
    Retention,
    OperatorReads,
    DeclaredRows,
)
