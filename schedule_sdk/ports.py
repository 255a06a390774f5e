"""The ports: what the core needs from the outside world, each with its contract.

An adapter author reads this one file; the suites of :mod:`schedule_sdk.testing.contracts` check
these sentences against every adapter (and against yours). All times are aware UTC datetimes.
All methods are thread-safe.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol, TypeVar, cast

from schedule_sdk.domain.declared import StoredDeclaration
from schedule_sdk.domain.errors import ScheduleValidationError, StoreLacksCapability
from schedule_sdk.domain.events import ScheduleArrivedEvent, ScheduleEvent, ScheduleMissedEvent
from schedule_sdk.domain.history import FireRecord
from schedule_sdk.domain.jobs import JobQuery, ScheduledJob
from schedule_sdk.domain.overview import JobSearch, Overview, SeenWorker
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.timers import Envelope, ScheduleTimer, TimerEntry, TimerState


class Clock(ABC):
    """Where "now" comes from (a fake one in tests)."""

    @abstractmethod
    def now(self) -> datetime:
        """The current instant, aware UTC."""

    @property
    def real_time(self) -> bool:
        """Whether this clock moves on its own, with real time (a fake one in tests does not):
        only then does a worker claim ahead of the due instant and wait the rest out
        (:func:`claim_horizon`)."""
        return False


class ClaimClock(Clock):
    """The clock claims are made by: the store's clock as this process knows it (see
    :class:`~schedule_sdk.core.store_time.StoreTime`). A row is due when its ``run_at`` has
    passed on the store's clock, whatever this process's own clock says."""

    @abstractmethod
    def claim_now(self) -> datetime | None:
        """An instant known to have passed on the store's clock (its best estimate less the
        estimate's error), or None while this process may not claim: its offset from the store's
        clock is unknown or beyond the bound it is allowed."""


def claim_time(clock: Clock) -> datetime | None:
    """What a claimer compares ``run_at`` with: ``clock.claim_now()`` for a :class:`ClaimClock`,
    else ``clock.now()`` (a plain clock, e.g. a test's fake one, is taken as the store's). None:
    claim nothing now."""
    return clock.claim_now() if isinstance(clock, ClaimClock) else clock.now()


#: How long before its due instant a worker claims an occurrence (on a real-time clock): the
#: claim's round trip is then made before the due instant, not after it, and the fire path holds
#: the claimed job until the due instant (:meth:`~schedule_sdk.core.firing.Firing.run`), so the
#: fire still starts no earlier than ``run_at`` on the store's clock.
CLAIM_AHEAD = timedelta(milliseconds=10)


def claim_lead(clock: Clock) -> timedelta:
    """How long before its due instant a claimer on ``clock`` claims a row: :data:`CLAIM_AHEAD`
    on a real-time clock, nothing on any other (a fake clock in tests does not move while the
    fire path would wait for it)."""
    return CLAIM_AHEAD if clock.real_time else timedelta(0)


def claim_horizon(clock: Clock) -> datetime | None:
    """The instant a claimer claims the rows due by: :func:`claim_time` plus :func:`claim_lead`.
    None: claim nothing now."""
    now = claim_time(clock)
    return None if now is None else now + claim_lead(clock)


class DueClaim(NamedTuple):
    """What :meth:`JobStore.claim_due_planned` answers: the claimed jobs, the next instant a claim
    could find more (None: nothing pending but what waits for a slot, or a full claim), and
    whether jobs due by the claim's ``now`` were left waiting for a concurrency slot (True when
    the store cannot tell)."""

    jobs: list[ScheduledJob]
    next_due_at: datetime | None
    waiting: bool = True


#: ``(job_id, occurrence, attempt)``: which fire of which job.
OccurrenceRef = tuple[str, int, int]


def key_of(ref: OccurrenceRef) -> str:
    """The occurrence key of ``ref``: ``<job id>_<occurrence>_<attempt>``."""
    job_id, occurrence, attempt = ref
    return f"{job_id}_{occurrence}_{attempt}"


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One hand-off to the execution queue: attempt ``attempt`` of occurrence ``occurrence`` of a job,
    due at ``due_at``. ``key`` is deterministic, so handing the same attempt over twice is harmless."""

    job_id: str
    occurrence: int
    attempt: int
    due_at: datetime

    @property
    def key(self) -> str:
        """``<job id>_<occurrence>_<attempt>``: only ``[A-Za-z0-9_-]`` (safe as an RQ job id)."""
        return key_of((self.job_id, self.occurrence, self.attempt))

    @classmethod
    def of(cls, job: ScheduledJob) -> Occurrence:
        return cls(job.id, job.occurrence, job.attempt, job.run_at)


@dataclass(frozen=True, slots=True)
class OpenOccurrence:
    """An open row as the reconciler reads it (:meth:`JobStore.scan_open_occurrences`): its
    current occurrence, and whether it is pending (else active: being fired)."""

    occurrence: Occurrence
    pending: bool


@dataclass(frozen=True, slots=True)
class Guard:
    """The condition a compare-and-set update needs: the row's status is one of ``statuses`` and,
    when ``claimed_by`` is given, the row is claimed by that worker for ``occurrence``."""

    statuses: frozenset[JobStatus]
    claimed_by: str | None = None
    occurrence: int | None = None


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


class Metrics(ABC):
    """Counters and timings of jobs and of the timer, with dotted names (``schedule.jobs.fired``,
    ``timer.commands.received``; the full list is in :mod:`schedule_sdk.adapters.metrics`).

    ``labels`` take bounded values only (a topic, an outcome), never a job id. Implementations
    are called on the fire path: they must not block or do I/O.
    """

    @abstractmethod
    def increment(self, name: str, value: int = 1, **labels: str) -> None:
        """Add ``value`` to counter ``name``."""

    @abstractmethod
    def observe(self, name: str, seconds: float, **labels: str) -> None:
        """Record one timing of ``name``, in seconds."""


@dataclass(frozen=True, slots=True)
class TopicBacklog:
    """Open jobs of one topic at one instant: ``pending`` rows, of which ``due`` are due but not
    yet fired (``run_at <= now``), the oldest of those due at ``oldest_due`` (None: none due)."""

    topic: str
    pending: int
    due: int
    oldest_due: datetime | None


@dataclass(frozen=True, slots=True)
class KeyLoad:
    """One concurrency key at one instant: the highest ``limit`` its open jobs name, its
    ``running`` fires (active rows), and its ``waiting`` ones (pending and due, not yet claimed),
    the oldest of those due at ``oldest_waiting`` (None: none waits)."""

    key: str
    limit: int
    running: int
    waiting: int
    oldest_waiting: datetime | None


class FireSpan(ABC):
    """The span of one fire, open while its listeners run."""

    @abstractmethod
    def finish(self, outcome: str, error: BaseException | None) -> None:
        """Record what the fire led to (``completed``, ``next``, ``retry``, ``failed`` or
        ``skipped``) and the listener's error, if any, before the span ends."""


class Tracing(ABC):
    """Trace context across the wait: captured with a job when it is scheduled, restored around
    each of its fires. Implementations are called on the schedule and fire paths: no I/O."""

    @abstractmethod
    def capture(self) -> str | None:
        """The caller's current trace context as text to store with a new job (None: none)."""

    @abstractmethod
    def fire(self, job: ScheduledJob, lateness: float) -> AbstractContextManager[FireSpan]:
        """A span around one fire of ``job`` (``lateness`` seconds after its due instant), in the
        trace stored with the job, current while the listeners run."""


class JobTransaction(ABC):
    """Writes inside one store transaction. Nothing is visible to others until it commits;
    leaving the ``with`` block with an exception rolls everything back."""

    @abstractmethod
    def insert(self, job: ScheduledJob) -> None:
        """Insert a new job row.

        :raises ClientRequestIdInUse: ``job.metadata.client_request_id`` is used by any other job
            (the check is a unique index, so two racing transactions cannot both win).
        """

    def insert_many(self, jobs: Sequence[ScheduledJob]) -> None:
        """Insert new job rows, in one statement where the store can (same contract as ``insert``).
        The default inserts them one by one (a derivation, correct for every store)."""
        for job in jobs:
            self.insert(job)

    @abstractmethod
    def get(self, job_id: str, *, for_update: bool = False) -> ScheduledJob | None:
        """The job, or None. ``for_update`` locks the row until the transaction ends."""

    @abstractmethod
    def update(self, job: ScheduledJob, guard: Guard) -> bool:
        """Write every mutable field of ``job`` to its row if the row satisfies ``guard``;
        return whether it did (False: the row moved on, e.g. it was cancelled meanwhile)."""

    @abstractmethod
    def update_many(self, changes: Sequence[tuple[ScheduledJob, Guard]]) -> None:
        """``update`` for many rows at once (rows failing their guard are left alone)."""

    @abstractmethod
    def waiting(self, keys: Sequence[str], now: datetime, per_key: int) -> list[Occurrence]:
        """The occurrences waiting for a slot of these concurrency keys: pending jobs with one of
        ``keys`` due at or before ``now``, the earliest ``per_key`` of each key (due order), as
        this transaction sees them. A fire path that has just freed slots of ``keys`` hands them
        to the queue again (:meth:`ExecutionQueue.enqueue` is idempotent per occurrence)."""


class JoinedTransaction(JobTransaction):
    """Writes inside the *caller's* transaction (see :meth:`JoinableStore.join`): the store neither
    commits nor rolls back; whoever owns the transaction does."""

    @abstractmethod
    def when_done(self, committed: Callable[[], None], rolled_back: Callable[[], None]) -> None:
        """Call ``committed`` once the caller's transaction has committed, or ``rolled_back`` once
        it rolled back (on the thread that ends it; each at most once)."""


# --- the job store and its capabilities ---------------------------------------------------------
#
# ``JobStore`` is what every store must do: the core cannot schedule or fire without it. The other
# ports below are capabilities a store adds by inheriting them too (``class MyStore(JobStore,
# WorkerRegistry)``); every method of each is abstract, so a store either does all of a
# capability or does not claim it. The container checks, when it builds a component, that the
# configured store has the capabilities that component needs (``StoreLacksCapability``).


_Capability = TypeVar("_Capability")


class JobStore(ABC):
    """The source of truth for jobs (and, for the ``sql`` substrate, the delay index): write
    transactions, reads, claims with leases, and the scans the reconciler and the poller need.

    The methods with a body are derivations of the abstract ones, correct for every store; a store
    overrides them only to do the same in fewer round trips.

    :raises StoreUnavailable: from any method when the database is unreachable or fails.
    """

    @abstractmethod
    def transaction(self) -> AbstractContextManager[JobTransaction]:
        """A write transaction: commits when the block ends normally, rolls back on an exception."""

    def outcome_transaction(self) -> AbstractContextManager[JobTransaction]:
        """:meth:`transaction` for recording the outcomes of fires (derived: it is that
        transaction). A store may commit this one without waiting until it is durable (the SQL
        store on PostgreSQL does not wait for the WAL flush): an outcome lost in a crash of the
        database leaves its fire claimed, so it fires again once its lease ends (at least once),
        and a fire's slot and next occurrence wait for no disk flush."""
        return self.transaction()

    @abstractmethod
    def get(self, job_id: str) -> ScheduledJob | None:
        """The job with this id, or None."""

    @abstractmethod
    def list_jobs(self, query: JobQuery) -> list[ScheduledJob]:
        """Up to ``query.limit`` jobs matching every given filter, with ``id > query.after_id``,
        in ascending id order (ids are UUIDv7, so this is creation order; keyset, never OFFSET)."""

    @abstractmethod
    def claim_due(
        self, now: datetime, limit: int, worker_id: str, lease_until: datetime
    ) -> list[ScheduledJob]:
        """Atomically move up to ``limit`` pending jobs with ``run_at <= now`` (earliest first) to
        ``active``, claimed by ``worker_id`` until ``lease_until``; return them as claimed. Rows
        another transaction is claiming are skipped, never claimed twice.

        A job with a :class:`~schedule_sdk.domain.jobs.ConcurrencyLimit` is claimed only while
        fewer than its ``limit`` jobs with its key are ``active`` (counting those this call
        claims), even when claims race (in every process); the jobs of a key are claimed in due
        order, and those left are *waiting*: pending and due."""

    @abstractmethod
    def claim_many(
        self,
        occurrences: Sequence[OccurrenceRef],
        now: datetime,
        worker_id: str,
        lease_until: datetime,
    ) -> list[ScheduledJob]:
        """Claim, like ``claim_due``, each ``(job_id, occurrence, attempt)`` whose job is pending,
        due, and at exactly that occurrence and attempt; return those claimed (any order). The others
        (cancelled, already fired, not yet due, or being claimed by someone else) are left alone.
        Concurrency limits hold as in ``claim_due`` (the given jobs of a key in due order): a job
        whose key is full is left pending (waiting)."""

    def claim(
        self, job_id: str, occurrence: int, attempt: int, now: datetime, worker_id: str, lease_until: datetime
    ) -> ScheduledJob | None:
        """``claim_many`` for one occurrence: the claimed job, or None (derived from ``claim_many``)."""
        claimed = self.claim_many([(job_id, occurrence, attempt)], now, worker_id, lease_until)
        return claimed[0] if claimed else None

    def warm(self) -> None:
        """Open now what claims will use (a connection of their own, say), so that a worker's
        first claim costs what the others do. A worker calls it once as it starts; a store that
        opens nothing lazily has nothing to do."""
        return None

    @abstractmethod
    def extend_claims(self, worker_id: str, job_ids: Sequence[str], lease_until: datetime) -> None:
        """Push the lease of these active jobs claimed by ``worker_id`` to ``lease_until``. A
        store may skip a row another transaction is writing at that moment (its outcome being
        recorded) rather than wait for it: the next beat extends it if it is still held."""

    @abstractmethod
    def release_claims(self, worker_id: str, job_ids: Sequence[str]) -> int:
        """Return these active jobs claimed by ``worker_id`` to ``pending`` (same occurrence and
        attempt, due at once); return how many were released."""

    @abstractmethod
    def release_expired(self, now: datetime, limit: int) -> list[ScheduledJob]:
        """Return up to ``limit`` active jobs whose lease ended before ``now`` to ``pending``
        (same occurrence and attempt, so they fire again); return them as released."""

    @abstractmethod
    def next_due_at(self, now: datetime | None = None) -> datetime | None:
        """The earliest ``run_at`` of any pending job, or None. With ``now``, jobs with a
        concurrency key due at or before ``now`` are left out: a claim at ``now`` left them
        waiting for a slot, and whoever frees one wakes the runners (so a poller does not spin)."""

    def claim_due_planned(self, now: datetime, limit: int, worker_id: str, lease_until: datetime) -> DueClaim:
        """``claim_due``, and what a poller waits for next: when fewer than ``limit`` jobs were
        claimed, the earliest ``run_at`` of a pending job that this claim neither took nor left
        waiting for a slot (None: no such job; the field is None too when the claim was full).

        The default calls ``claim_due`` then ``next_due_at(now)``; a store may answer both in one
        round trip, and may then leave out rows another claim is taking at that moment (they are
        active once it commits, or pending again and announced by the store's watch or found by
        the poller's next periodic read if it fails)."""
        claimed = self.claim_due(now, limit, worker_id, lease_until)
        return DueClaim(claimed, None if len(claimed) >= limit else self.next_due_at(now))

    @abstractmethod
    def scan_open(self, after_id: str | None, limit: int) -> list[ScheduledJob]:
        """Up to ``limit`` pending or active jobs with ``id > after_id``, in id order."""

    def scan_open_occurrences(self, after_id: str | None, limit: int) -> list[OpenOccurrence]:
        """The rows :meth:`scan_open` returns, in the same order, as the reconciler needs them:
        each one's occurrence (id, occurrence, attempt, ``run_at``) and whether it is pending.
        The default reads whole jobs through :meth:`scan_open`; a store may read those columns
        only (the reconciler reads every open row)."""
        return [
            OpenOccurrence(Occurrence.of(job), job.status is JobStatus.PENDING)
            for job in self.scan_open(after_id, limit)
        ]

    def concurrency_load(self, now: datetime) -> list[KeyLoad]:
        """The open jobs of each concurrency key (keys with none are left out), in key order: for
        the concurrency gauges and the dashboard. Not on the fire path. The default pages through
        :meth:`scan_open`; a store may answer it in one query (the SQL store does)."""
        found: dict[str, list[Any]] = {}
        after: str | None = None
        while page := self.scan_open(after, 1000):
            after = page[-1].id
            for job in page:
                if job.concurrency is not None:
                    entry = found.setdefault(job.concurrency.key, [0, 0, 0, None])
                    entry[0] = max(entry[0], job.concurrency.limit)
                    if job.status is JobStatus.ACTIVE:
                        entry[1] += 1
                    elif job.run_at <= now:
                        entry[2] += 1
                        entry[3] = job.run_at if entry[3] is None else min(entry[3], job.run_at)
        return [KeyLoad(key, *found[key]) for key in sorted(found)]

    def backlog(self, now: datetime) -> list[TopicBacklog]:
        """Pending jobs per topic (topics with none are left out), in topic order: for the pending
        and backlog gauges and the health check. Not on the fire path. The default pages through
        :meth:`scan_open`; a store may answer it in one query (the SQL store does)."""
        found: dict[str, list[Any]] = {}
        after: str | None = None
        while page := self.scan_open(after, 1000):
            after = page[-1].id
            for job in page:
                if job.status is JobStatus.PENDING:
                    entry = found.setdefault(job.topic, [0, 0, None])
                    entry[0] += 1
                    if job.run_at <= now:
                        entry[1] += 1
                        entry[2] = job.run_at if entry[2] is None else min(entry[2], job.run_at)
        return [TopicBacklog(topic, *found[topic]) for topic in sorted(found)]

    @abstractmethod
    def watch(
        self,
        on_change: Callable[[datetime | None], None],
        on_slot_freed: Callable[[], None] | None = None,
    ) -> Callable[[], None]:
        """Call ``on_change(due_at)`` (from any thread) soon after another process schedules a job
        (``due_at`` its due time, or None when unknown); return a function that stops watching.
        A store that announces a freed concurrency slot as such calls ``on_slot_freed`` for it
        (``on_change(None)`` when that is not given); another may report it as ``on_change``.
        Best effort: a missed call only delays a fire until the poller's safety-net interval. A
        store no other process writes to (in memory) has nothing to report: it returns a stop
        function at once."""

    @abstractmethod
    def close(self) -> None:
        """Release connections and threads."""

    def capability(self, port: type[_Capability]) -> _Capability | None:
        """This store's implementation of the capability ``port`` (one of :data:`CAPABILITIES`), or
        None. By default the store itself when it inherits ``port``; a store that composes its
        capabilities as objects of their own returns those. Use :func:`provided` or :func:`require`."""
        return self if isinstance(self, port) else None


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


def provided(store: object, capability: Callable[..., _Capability]) -> _Capability | None:
    """``store``'s implementation of ``capability`` (one of :data:`CAPABILITIES`, an abstract class:
    hence typed as a callable, which mypy accepts): :meth:`JobStore.capability` for a job store,
    else ``store`` itself if it inherits ``capability``; None when it has none."""
    port = cast(type, capability)
    found = store.capability(port) if isinstance(store, JobStore) else store
    return cast(_Capability, found) if isinstance(found, port) else None


def require(store: object, capability: Callable[..., _Capability], needed_by: str) -> _Capability:
    """``store`` as ``capability`` (one of :data:`CAPABILITIES`, an abstract class: hence typed as
    a callable, which mypy accepts), or refuse, naming ``needed_by``: what needs it.

    :raises StoreLacksCapability: ``store`` does not provide ``capability`` (:func:`provided`).
    """
    found = provided(store, capability)
    if found is not None:
        return found
    raise StoreLacksCapability(type(store).__name__, cast(type, capability).__name__, needed_by)


class ExecutionQueue(ABC):
    """The execution substrate: holds timing for each due occurrence (docs/explanation/write-order.md).

    The write order is: open a store transaction, write the row, ``enqueue`` inside it, commit,
    then ``committed``. If ``enqueue`` raises, the transaction rolls back; if the commit fails
    after ``enqueue``, the caller calls ``withdraw`` (the compensating removal) and the
    reconciler heals anything left over.
    """

    name: str = "queue"
    #: False when the store itself is the queue (the ``sql`` substrate): no entry can be missing,
    #: so a worker starting skips the reconciler's scan of every open row.
    holds_entries: bool = True

    @abstractmethod
    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        """Hand these occurrences over, each to fire at or after its ``due_at`` (never before).
        Idempotent per ``Occurrence.key``.

        :raises QueueUnavailable: the substrate cannot take them; nothing was handed over.
        """

    def committed(self, occurrences: Sequence[Occurrence]) -> None:
        """Called after the transaction that enqueued ``occurrences`` committed (optional hook)."""
        return None

    @abstractmethod
    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        """Remove these entries if present (best effort, never raises for missing entries)."""

    @abstractmethod
    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        """Those of ``occurrences`` that have no entry in the substrate (for the reconciler)."""

    def stranded(self, older_than: float) -> list[OccurrenceRef]:
        """Occurrences whose entries have waited more than ``older_than`` seconds in a step some
        process should have finished (handed over in a transaction whose ``committed`` never came,
        or taken for firing and never claimed): that process may have died. The reconciler
        re-checks each against the store. Default: none (entries that cannot be stranded)."""
        return []

    def discard_stranded(self, occurrences: Sequence[OccurrenceRef], older_than: float) -> None:
        """Drop the stranded entries of these occurrences whose rows moved on, keeping any that
        was handed over again in the last ``older_than`` seconds (best effort, never raises)."""
        return None

    def incarnation(self) -> str | None:
        """Which server state holds the entries now: a value that changes when entries may have
        been lost wholesale (the substrate failed over to a replica that had not received the
        latest writes, or restarted without them). A worker's heartbeat compares it with the one
        it saw last and, when it changed, reconciles at once. Default: None (nothing can be lost
        that way, e.g. the store is the queue).

        :raises QueueUnavailable: the substrate did not answer.
        """
        return None

    def risks(self) -> list[str]:
        """How the substrate's configuration could lose entries (one line each, e.g. an eviction
        policy that may evict them), for the health check and the log of a starting worker.
        Default: none.

        :raises QueueUnavailable: the substrate did not answer.
        """
        return []


class CommitSignal(ABC):
    """A queue that tells runners in this process when a commit handed over an occurrence (the
    ``sql`` substrate's queue: its poller then re-plans at once instead of at its next read)."""

    @abstractmethod
    def subscribe(self, wake: Callable[[datetime | None], None]) -> Callable[[], None]:
        """Call ``wake(due_at)`` after each commit that handed occurrences over (``due_at``: the
        earliest of them; None when unknown), on the committing thread; return a function that
        unsubscribes. ``wake`` must not block."""


@dataclass(frozen=True, slots=True)
class ReleasedBatch:
    """Entries the delay index released together, as a consumer pops them
    (:meth:`DelayIndex.pop_released`): ``members`` are occurrence keys; a consumer holds the
    batch until ``due_ms`` (epoch ms; None: fire at once) before it claims them."""

    id: str
    members: list[str]
    due_ms: float | None


class WakeUps(ABC):
    """A subscription to a delay index's wake-ups (:meth:`DelayIndex.wakeups`)."""

    @abstractmethod
    def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds (never much longer: a few ms at most) for a wake-up;
        True when one came (an entry earlier than the releaser's plan was activated, or
        :meth:`DelayIndex.nudge`). False may come early without one: a caller waiting for an
        instant waits again for the rest.

        :raises QueueUnavailable: the subscription is lost (close it and subscribe again).
        """

    @abstractmethod
    def close(self) -> None:
        """End the subscription (never raises)."""


class DelayIndex(ABC):
    """The delay index of a substrate that releases due entries by itself (the ``rq`` substrate:
    :class:`~schedule_sdk.substrates.rq.queue.RQExecutionQueue`): what its releaser (the pump),
    its consumer and its fire runtimes (``schedule_sdk/substrates/rq/``) call besides the
    :class:`ExecutionQueue` methods; they see the backend through this port only.

    An entry is an occurrence key (:attr:`Occurrence.key`) with a due instant in epoch
    milliseconds. An entry is *delayed* until released, then *released* (marked, handed to the
    consumers) until the fire path is ``done`` with it. One releaser at a time releases entries:
    the holder of the releaser lease (:meth:`lead`). Raises ``QueueUnavailable`` unless a method
    says it never raises.
    """

    #: The name workers check a released batch against (a batch of another queue is refused).
    queue_name: str

    @abstractmethod
    def activate(self, entries: Sequence[tuple[str, float]]) -> None:
        """Put ``(key, due ms)`` entries in the delay index (an entry already there moves to the
        new due instant; a releaser waiting past the earliest is woken through :meth:`wakeups`)."""

    @abstractmethod
    def release(self, until_ms: float, limit: int) -> tuple[list[str], float | None]:
        """Release up to ``limit`` entries due at or before ``until_ms`` (never one due later),
        earliest first, to the consumers, atomically; return them and the earliest due ms left
        (None: none left), recorded as the releaser's plan (so an activation earlier than it
        wakes the releaser). ``until_ms`` may be a few ms ahead of now: the released entries then
        carry their due instant (:attr:`ReleasedBatch.due_ms`), and consumers hold them until it
        before claiming."""

    @abstractmethod
    def plan(self) -> float | None:
        """The earliest due ms in the index (None: empty), recorded as the releaser's plan."""

    @abstractmethod
    def pop_released(self, limit: int, timeout: float, done: Sequence[str] = ()) -> list[ReleasedBatch]:
        """Take up to ``limit`` released batches off the consumers' queue, in release order,
        waiting up to ``timeout`` seconds for the first (``[]``: none came). A batch is taken
        once: no other consumer gets it. Batches that are not this queue's fires are refused
        (logged, dropped). The released marks of ``done`` (entries the fire path took, see
        :meth:`done`) are dropped on the way, in the same round trip as the pop when one came;
        when this raises, none of them counts as dropped."""

    @abstractmethod
    def done(self, members: Sequence[str]) -> None:
        """The fire path took these released entries (claimed them, or found them stale)."""

    @abstractmethod
    def touch(self, members: Sequence[str]) -> None:
        """Renew the released marks of entries a live worker holds but has not claimed yet, so
        they are not reported as stranded."""

    @abstractmethod
    def restore(self, members: Sequence[str]) -> None:
        """Put released entries back in the delay index, due now (a stopping worker's leftovers)."""

    @abstractmethod
    def forget(self, members: Sequence[str]) -> None:
        """Remove every trace of these entries (best effort, never raises)."""

    # -- the releaser: one at a time, woken when an earlier entry comes -------------------------

    @abstractmethod
    def lead(self, token: str, ttl: float) -> bool:
        """Take the releaser lease for ``token`` (``<worker id>/<32 hex digits>``) if nobody holds
        it, or renew it if ``token`` holds it, for ``ttl`` seconds; True while ``token`` holds it."""

    @abstractmethod
    def resign(self, token: str) -> None:
        """Give the lease up if ``token`` still holds it (else leave it alone)."""

    @abstractmethod
    def depose(self, worker_ids: Sequence[str]) -> bool:
        """Delete the lease if its token names one of these (dead) workers exactly; True if it did."""

    @abstractmethod
    def wakeups(self) -> WakeUps:
        """Subscribe to the wake-ups (a releaser subscribes while it holds the lease)."""

    @abstractmethod
    def nudge(self) -> None:
        """Wake every subscriber now (a stopping releaser; best effort, never raises)."""


class Listeners(ABC):
    """This process's ``@on_event`` listeners, as an event publisher reaches them
    (:class:`~schedule_sdk.ListenerRegistry` is the one implementation)."""

    @abstractmethod
    def deliver(self, event: ScheduleEvent) -> int:
        """Run every listener of ``event``'s names, each isolated from the others; an ``async def``
        listener runs to completion on the registry's listener loop while this thread waits.
        Returns how many listeners ran (0: nobody heard the event here).

        :raises ListenerFailed: after all listeners ran, if any of them raised.
        """

    @abstractmethod
    def count(self) -> int:
        """How many listeners are bound, over every event name (0: a worker would hear nothing)."""


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


class EventPublisher(ABC):
    """Delivers an arrived event to the listeners of both of its names."""

    @abstractmethod
    def publish(self, event: ScheduleArrivedEvent) -> int | None:
        """Emit ``schedule.arrived`` and ``schedule.<topic>.arrived`` with ``event``.

        Every listener runs even if an earlier one raised. Returns how many listeners heard it:
        0 makes the fire ``unheard`` in the fire history; None (a publisher that cannot tell)
        counts as heard.

        :raises ListenerFailed: at least one listener raised (the fire is then retried as a whole).
        """

    def publish_missed(self, event: ScheduleMissedEvent) -> None:
        """Emit ``schedule.missed`` and ``schedule.<topic>.missed`` with ``event`` (occurrences
        the job's misfire policy skipped or coalesced, or its overlap policy did not fire; see
        ``event.reason``). Optional: the default drops the event
        (the fire path logs it anyway). Listener failures may raise ``ListenerFailed``; the fire
        path logs them and does not retry."""
        return None

    def close(self) -> None:
        """Release connections and threads (optional hook)."""
        return None


class Runner(Protocol):
    """What an execution substrate runs inside a worker: the due poller
    (:class:`~schedule_sdk.substrates.sql.poller.DuePoller`) or the rq pump and consumer
    (:class:`~schedule_sdk.substrates.rq.runner.RQRunner`). Both calls return promptly."""

    def start(self) -> None:
        """Start driving fires (threads of its own)."""
        ...

    def stop(self) -> None:
        """Stop driving fires; in-flight fires are the dispatcher's to finish or release."""
        ...

    def peers_dead(self, worker_ids: Sequence[str]) -> None:
        """These workers were just declared dead: take over what only they were doing (the rq
        pump's lock). Must not raise for a backend error."""
        ...


# -- the fire path, as the substrates see it ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FireResult:
    """A finished fire: the job as claimed, the state to record, and the fire history entry
    written with it (None: nothing ran, e.g. a substrate that records no history)."""

    claimed: ScheduledJob
    outcome: ScheduledJob
    fire: FireRecord | None = None
    #: The history entry of the occurrences that came due while this fire ran and that the
    #: job's overlap policy did not fire (``skipped``), written with it; None: there were none.
    overlapped: FireRecord | None = None
    #: The run that fires this occurrence (a job with the overlap policy ``allow`` hands each
    #: occurrence to a one-shot row of its own, ``ScheduledJob.run_of``): inserted and handed
    #: to the queue with the outcome, only if the outcome is written (the row was still claimed
    #: by the firing worker for this occurrence); None: the listeners ran here.
    run: ScheduledJob | None = None


class FirePath(ABC):
    """The core's fire path (:class:`~schedule_sdk.core.firing.Firing`): what a substrate that
    fires claimed jobs itself (``inline``, the rq job function) calls."""

    @abstractmethod
    def run(self, job: ScheduledJob) -> FireResult:
        """Fire a job claimed by the caller (its listeners run); never raises for a listener's
        error (the result says retry or fail)."""

    @abstractmethod
    def record(self, results: Sequence[FireResult]) -> None:
        """Record these fires' outcomes in one transaction, in the write order (next occurrences,
        retries and runs are handed to the queue); rows no longer claimed by the firing worker
        are left alone (and their runs are not inserted).

        :raises StoreUnavailable, QueueUnavailable: nothing was recorded; the fires repeat once
            their claims expire.
        """

    def fire(self, job: ScheduledJob) -> FireResult:
        """:meth:`run` then :meth:`record` one claimed job."""
        result = self.run(job)
        self.record([result])
        return result


class Dispatcher(ABC):
    """Where a substrate's runner hands the jobs it claimed
    (:class:`~schedule_sdk.core.dispatch.FireDispatcher`): they run on the worker's listener pool
    and their outcomes are recorded in batches; the dispatcher holds each claim until its outcome
    is recorded, or releases it at stop."""

    #: The worker the runner claims for (``claimed_by``).
    worker_id: str
    #: Called (from any thread) whenever capacity frees up; a runner sets it to wake its loop.
    on_capacity: Callable[[], None]
    #: Called with the jobs a stopping dispatcher returned to pending, so a substrate whose entry
    #: was consumed (``rq``) can hand them over again; a runner sets it.
    on_release: Callable[[list[ScheduledJob]], None]

    @abstractmethod
    def capacity(self) -> int:
        """How many more claimed jobs it accepts now (0 or less: wait for ``on_capacity``)."""

    @abstractmethod
    def submit(self, jobs: Sequence[ScheduledJob]) -> None:
        """Fire these jobs (claimed by ``worker_id``) in the background."""


# -- end fire path ---------------------------------------------------------------------------------


# --- the timer's ports: where timers are kept, where commands come from, where events go ---


class TimerStore(ABC):
    """``timer_schedules``. Every method that serves a tenant takes ``tenant_id`` and filters by it;
    writes run inside the job store's transaction (``tx``), so a timer row and the job that fires
    it commit together.

    :raises StoreUnavailable: the database is unreachable or failed.
    """

    @abstractmethod
    def get(
        self, tenant_id: str, service_call_id: str, tx: JobTransaction | None = None
    ) -> TimerEntry | None:
        """The tenant's timer, or None (inside ``tx``: locked until it ends)."""

    @abstractmethod
    def get_many(
        self, tx: JobTransaction, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], TimerEntry]:
        """The timers of these ``(tenant_id, service_call_id)`` keys that exist, locked until ``tx`` ends."""

    @abstractmethod
    def insert_many(self, tx: JobTransaction, entries: Sequence[TimerEntry]) -> set[tuple[str, str]]:
        """Insert each entry unless its tenant already has a timer for its serviceCallId; return
        the keys inserted.

        :raises InvalidTimerCommand: the host's ``service_calls`` foreign key refused one of them.
        """

    @abstractmethod
    def move(self, tx: JobTransaction, tenant_id: str, service_call_id: str, due_at: datetime) -> bool:
        """Set the due time of the tenant's timer if it is still Scheduled; return whether it did."""

    @abstractmethod
    def mark_reached(self, tx: JobTransaction, entry: TimerEntry, reached_at: datetime) -> bool:
        """Mark the timer Reached if it is still Scheduled *and still due at* ``entry.due_at``
        (a move that landed meanwhile wins); return whether it did."""

    @abstractmethod
    def find_due(self, tenant_id: str, now: datetime, limit: int = 100) -> list[TimerEntry]:
        """The tenant's Scheduled timers due at or before ``now``, earliest first."""

    @abstractmethod
    def by_correlation(self, tenant_id: str, correlation_id: str) -> list[TimerEntry]:
        """The tenant's timers carrying ``correlation_id``, earliest due first."""

    @abstractmethod
    def unarmed(self, topic: str, limit: int) -> list[TimerEntry]:
        """Scheduled timers (any tenant: a maintenance query) with no pending or active job of
        ``topic`` for them: nothing would fire them. Used to heal."""


class MessageBus(ABC):
    """Where DueTimeReached envelopes go."""

    @abstractmethod
    def publish(self, envelope: Envelope) -> None:
        """Publish ``envelope``; return only once the broker has accepted it.

        :raises BrokerUnavailable: not accepted (the fire is retried).
        """

    def close(self) -> None:
        return None


class CommandSink(Protocol):
    """What a command source hands commands to (the :class:`~schedule_sdk.core.timers.TimerService`)."""

    def handle_each(self, commands: Sequence[ScheduleTimer]) -> Sequence[object]:
        """Persist ``commands`` before returning; one result per command: an outcome, or the
        :class:`ScheduleValidationError` that refused it.

        :raises StoreUnavailable: nothing was persisted (the source should redeliver).
        """
        ...

    def malformed(self, error: ScheduleValidationError, raw: bytes | str) -> None:
        """Record a message that is not a valid command."""
        ...


class CommandSource(ABC):
    """Where ScheduleTimer commands come from. A source acknowledges a command only after
    ``sink.handle_each`` persisted it; it terminates (never redelivers) a malformed one."""

    @abstractmethod
    def start(self, sink: CommandSink) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...


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


#: The capabilities a store may add to :class:`JobStore`.
CAPABILITIES: tuple[type, ...] = (
    JoinableStore,
    WorkerRegistry,
    FireHistory,
    Retention,
    OperatorReads,
    DeclaredRows,
)
