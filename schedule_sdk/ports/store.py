"""The job store: its transactions, the occurrences it hands to the queue and the reads and
claims the fire path makes. Optional capabilities a store may add are in
:mod:`schedule_sdk.ports.capabilities`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from schedule_sdk.domain.jobs import JobQuery, ScheduledJob
from schedule_sdk.domain.status import JobStatus


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

    def still_claimed(self, job: ScheduledJob) -> bool:
        """Whether ``job``'s row is still as a claim returned it: ``active``, claimed by
        ``job.claimed_by`` at ``job.occurrence`` and ``job.attempt`` (False: it was cancelled,
        paused, rescheduled, released or fired meanwhile, or is gone). The read sees every write
        committed before it started. The fire path asks it of a job claimed ahead of its due
        instant, once the job is due. The default reads the whole row (:meth:`get`); a store may
        read those columns only."""
        row = self.get(job.id)
        return (
            row is not None
            and row.status is JobStatus.ACTIVE
            and row.claimed_by == job.claimed_by
            and (row.occurrence, row.attempt) == (job.occurrence, job.attempt)
        )

    def still_claimed_many(self, jobs: Sequence[ScheduledJob]) -> list[bool]:
        """:meth:`still_claimed` of each of ``jobs`` (in their order): every answer sees every
        write committed before the call started. The fire path asks it of the
        claimed-ahead jobs that are due when it reads one of them. The default asks
        :meth:`still_claimed` of each in turn; a store may read them in one statement."""
        return [self.still_claimed(job) for job in jobs]

    @abstractmethod
    def list_jobs(self, query: JobQuery) -> list[ScheduledJob]:
        """Up to ``query.limit`` jobs matching every given filter, with ``id > query.after_id``,
        in ascending id order (ids are UUIDv7, so this is creation order; keyset, never OFFSET)."""

    @abstractmethod
    def claim_due(
        self, now: datetime, limit: int, worker_id: str, lease_until: datetime
    ) -> list[ScheduledJob]:
        """Atomically move up to ``limit`` pending jobs with ``run_at <= now`` (earliest first) to
        ``active``, claimed by ``worker_id`` until ``lease_until``; return them as claimed, with
        ``updated_at`` set to ``now`` (the fire path tells by it whether a claim was made before
        the job's due instant: :func:`~schedule_sdk.core.claim_timing.claimed_ahead`). Rows
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

    def quiesce(self) -> None:
        """The worker stopped: end the background threads the store runs for its writes (a
        SQLite store's checkpointer), which start again with the next write that needs one. A
        worker calls it last in its stop; a store that runs no thread has nothing to do."""
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
        """This store's implementation of the capability ``port`` (one of
        :data:`~schedule_sdk.ports.capabilities.CAPABILITIES`), or None. By default the store
        itself when it inherits ``port``; a store that composes its capabilities as objects of
        their own returns those. Callers use :func:`~schedule_sdk.ports.capabilities.provided` or
        :func:`~schedule_sdk.ports.capabilities.require`."""
        return self if isinstance(self, port) else None
