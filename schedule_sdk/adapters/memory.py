"""``MemoryJobStore``: the job store in a dict, for tests and for reading the contract.

It behaves like the SQL store in every way the ports promise: a write transaction holds the
store's write lock from start to end (like SQLite's ``BEGIN IMMEDIATE``), buffers its writes and
applies them on commit; an exception rolls them back. Readers never wait for a writer and see only
committed rows. Rows are copied in and out (payloads through JSON, times as aware UTC), so a
caller's later changes to its objects never leak into the store. It has every capability of the
SQL store: it joins a caller's transaction (a :class:`MemoryConnection`), keeps a worker
registry, a fire history and the schedules declared in code (:class:`~schedule_sdk.ports.DeclaredRows`),
and purges.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from schedule_sdk.domain import concurrency
from schedule_sdk.domain.declared import StoredDeclaration
from schedule_sdk.domain.errors import ClientRequestIdInUse, StoreUnavailable, TransactionNotJoinable
from schedule_sdk.domain.history import FireRecord
from schedule_sdk.domain.jobs import (
    MUTABLE_FIELDS,
    JobQuery,
    ScheduledJob,
    encode_json,
    repeated_request_id,
    request_key,
)
from schedule_sdk.domain.status import FINISHED_STATUSES, JobStatus
from schedule_sdk.ports import (
    DeclaredRows,
    DueScan,
    FireHistory,
    Guard,
    JobStore,
    JobTransaction,
    JoinableStore,
    JoinedTransaction,
    Occurrence,
    OccurrenceRef,
    OpenOccurrence,
    RestartRepair,
    Retention,
    WorkerInfo,
    WorkerRegistry,
)

_TIMES = (
    "run_at",
    "scheduled_for",
    "ends_at",
    "last_fired_at",
    "claimed_until",
    "created_at",
    "updated_at",
    "regular_due",
)
_PENDING, _ACTIVE = JobStatus.PENDING, JobStatus.ACTIVE


def _copy(job: ScheduledJob) -> ScheduledJob:
    """A detached copy of ``job`` as the SQL store would return it."""
    changes: dict[str, Any] = {}
    for name in _TIMES:
        value = getattr(job, name)
        if value is not None:
            if value.tzinfo is None:
                raise StoreUnavailable(f"the job store rejected a write: naive datetime in {name}")
            changes[name] = value.astimezone(UTC)
    if job.payload is not None:
        changes["payload"] = json.loads(encode_json(job.payload))
    return job.evolve(**changes)


def _matches(row: ScheduledJob, guard: Guard) -> bool:
    if row.status not in guard.statuses:
        return False
    if guard.claimed_by is None:
        return True
    return row.claimed_by == guard.claimed_by and row.occurrence == guard.occurrence


class MemoryTransaction(JobTransaction):
    """A :class:`MemoryJobStore` transaction: its changes apply at commit, all or none."""

    def __init__(self, store: MemoryJobStore) -> None:
        self._store = store
        self.changes: dict[str, ScheduledJob] = {}
        self.fires: list[FireRecord] = []
        self.declared: dict[str, StoredDeclaration] = {}  # declarations put, by name
        #: Writes of other in-memory stores sharing this transaction (keyed by store), and what
        #: applies them when it commits (e.g. :class:`~schedule_sdk.testing.MemoryTimerStore`).
        self.staged: dict[object, Any] = {}
        self.on_commit: list[Callable[[], None]] = []

    def _current(self, job_id: str) -> ScheduledJob | None:
        return self.changes.get(job_id) or self._store._committed(job_id)

    def insert(self, job: ScheduledJob) -> None:
        row = _copy(job)
        if self._current(row.id) is not None:
            raise StoreUnavailable(f"the job store rejected a write: duplicate id {row.id!r}")
        key = request_key(row.metadata)
        if key is not None:
            rows = {**self._store._snapshot(), **self.changes}
            if any(request_key(r.metadata) == key for r in rows.values()):
                raise ClientRequestIdInUse(key[1], key[0])
        self.changes[row.id] = row

    def insert_many(self, jobs: Sequence[ScheduledJob]) -> None:
        # All or nothing, and each request id looked up once (not one scan of the rows per job).
        rows = {row.id: row for row in map(_copy, jobs)}
        if len(rows) < len(jobs) or any(self._current(row_id) is not None for row_id in rows):
            raise StoreUnavailable("the job store rejected a write: duplicate id")
        repeated = repeated_request_id(jobs)
        if repeated is not None:
            raise ClientRequestIdInUse(repeated[0][1], repeated[0][0])
        wanted = {request_key(job.metadata) for job in jobs} - {None}
        if wanted:
            for row in {**self._store._snapshot(), **self.changes}.values():
                if request_key(row.metadata) in wanted:
                    raise ClientRequestIdInUse(str(row.metadata.client_request_id), row.metadata.tenant_id)
        self.changes.update(rows)

    def get(self, job_id: str, *, for_update: bool = False) -> ScheduledJob | None:
        # Every write transaction holds the write lock, so every row is already locked for it.
        return self._current(job_id)

    def update(self, job: ScheduledJob, guard: Guard) -> bool:
        row = self._current(job.id)
        if row is None or not _matches(row, guard):
            return False
        new = _copy(job)
        self.changes[job.id] = row.evolve(**{name: getattr(new, name) for name in MUTABLE_FIELDS})
        return True

    def update_many(self, changes: Sequence[tuple[ScheduledJob, Guard]]) -> None:
        for job, guard in changes:
            self.update(job, guard)

    def waiting(self, keys: Sequence[str], now: datetime, per_key: int) -> list[Occurrence]:
        wanted = set(keys)
        rows = {**self._store._snapshot(), **self.changes}.values()
        due = sorted(
            (
                r
                for r in rows
                if r.status is _PENDING
                and r.concurrency is not None
                and r.concurrency.key in wanted
                and r.run_at <= now
            ),
            key=lambda r: (r.run_at, r.id),
        )
        found: list[Occurrence] = []
        taken: dict[str, int] = {}
        for row in due:
            assert row.concurrency is not None
            taken[row.concurrency.key] = taken.get(row.concurrency.key, 0) + 1
            if taken[row.concurrency.key] <= per_key:
                found.append(Occurrence.of(row))
        return found

    def record_fires(self, fires: Sequence[FireRecord]) -> None:
        for fire in fires:
            if fire.fired_at.tzinfo is None or fire.due_at.tzinfo is None:
                raise StoreUnavailable("the job store rejected a write: naive datetime in a fire")
            due_at, fired_at = fire.due_at.astimezone(UTC), fire.fired_at.astimezone(UTC)
            self.fires.append(dataclasses.replace(fire, due_at=due_at, fired_at=fired_at))


class _Joined(JoinedTransaction):
    def __init__(self, tx: MemoryTransaction, done: _Callbacks) -> None:
        self.tx = tx
        self._done = done

    def insert(self, job: ScheduledJob) -> None:
        self.tx.insert(job)

    def insert_many(self, jobs: Sequence[ScheduledJob]) -> None:
        self.tx.insert_many(jobs)

    def get(self, job_id: str, *, for_update: bool = False) -> ScheduledJob | None:
        return self.tx.get(job_id, for_update=for_update)

    def update(self, job: ScheduledJob, guard: Guard) -> bool:
        return self.tx.update(job, guard)

    def update_many(self, changes: Sequence[tuple[ScheduledJob, Guard]]) -> None:
        self.tx.update_many(changes)

    def waiting(self, keys: Sequence[str], now: datetime, per_key: int) -> list[Occurrence]:
        return self.tx.waiting(keys, now, per_key)

    def when_done(self, committed: Callable[[], None], rolled_back: Callable[[], None]) -> None:
        self._done.append((committed, rolled_back))


_Callbacks = list[tuple[Callable[[], None], Callable[[], None]]]


def _run(callbacks: _Callbacks, committed: bool) -> None:
    for on_commit, on_rollback in callbacks:
        (on_commit if committed else on_rollback)()


class MemoryConnection:
    """A caller's transaction on a :class:`MemoryJobStore`, standing in for a database connection
    in tests of code that passes ``connection=``: what the store writes through it (``join``) is
    applied by :meth:`commit` and dropped by :meth:`rollback`, which then run the ``when_done``
    callbacks. Like SQLite's ``BEGIN IMMEDIATE``, its transaction holds the store's write lock
    from the first join until it ends (so end it on the thread that joined)."""

    def __init__(self, store: MemoryJobStore) -> None:
        self.store = store
        self._tx: MemoryTransaction | None = None
        self._done: _Callbacks = []

    def transaction(self) -> tuple[MemoryTransaction, _Callbacks]:
        """The open transaction (begun, taking the write lock, if it was not)."""
        if self._tx is None:
            self.store._write_lock.acquire()
            self._tx = MemoryTransaction(self.store)
        return self._tx, self._done

    def commit(self) -> None:
        """Apply what was written, then run the ``committed`` callbacks."""
        self._end(True)

    def rollback(self) -> None:
        """Drop what was written, then run the ``rolled_back`` callbacks."""
        self._end(False)

    def close(self) -> None:
        """Roll back an open transaction (like closing a database connection)."""
        if self._tx is not None:
            self.rollback()

    def _end(self, committed: bool) -> None:
        tx, done = self._tx, self._done
        self._tx, self._done = None, []
        if tx is not None:
            try:
                if committed:
                    self.store._apply(tx)
            finally:
                self.store._write_lock.release()
        _run(done, committed)


def _own(store: MemoryJobStore, tx: JobTransaction, what: str) -> MemoryTransaction:
    """``tx`` as a transaction of ``store`` (``TypeError`` for any other store's)."""
    own = tx.tx if isinstance(tx, _Joined) else tx
    if not isinstance(own, MemoryTransaction) or own._store is not store:
        raise TypeError(f"MemoryJobStore.{what} needs a transaction of this store")
    return own


def _stored(row: StoredDeclaration) -> StoredDeclaration:
    """``row`` as the SQL store keeps it: ``synced_at`` aware UTC."""
    if row.synced_at.tzinfo is None:
        raise StoreUnavailable("the job store rejected a write: naive datetime in synced_at")
    return dataclasses.replace(row, synced_at=row.synced_at.astimezone(UTC))


class MemoryJobStore(
    JobStore, JoinableStore, DueScan, WorkerRegistry, RestartRepair, FireHistory, Retention, DeclaredRows
):
    """A faithful in-memory :class:`~schedule_sdk.ports.JobStore` (one process, no persistence),
    with every capability."""

    #: Its purge is one short step under the write lock: nothing to fit between due instants.
    one_writer = False

    def __init__(self) -> None:
        self._rows: dict[str, ScheduledJob] = {}
        self._fires: list[FireRecord] = []  # fire history, in commit order
        self._write_lock = threading.RLock()  # held by a write transaction from begin to commit
        self._data_lock = threading.Lock()  # held briefly to read or publish committed rows
        self._workers: dict[str, WorkerInfo] = {}  # the worker registry (under _write_lock)
        self._declared: dict[str, StoredDeclaration] = {}  # declared schedules (under _data_lock)

    # -- internals ---------------------------------------------------------------------------

    def _committed(self, job_id: str) -> ScheduledJob | None:
        with self._data_lock:
            return self._rows.get(job_id)

    def _snapshot(self) -> dict[str, ScheduledJob]:
        with self._data_lock:
            return dict(self._rows)

    def _select(self, keep: Callable[[ScheduledJob], bool]) -> list[ScheduledJob]:
        """Committed rows satisfying ``keep``, in id order."""
        return sorted((r for r in self._snapshot().values() if keep(r)), key=lambda r: r.id)

    @contextlib.contextmanager
    def _write(self) -> Iterator[MemoryTransaction]:
        with self._write_lock:
            tx = MemoryTransaction(self)
            yield tx
            self._apply(tx)

    def _apply(self, tx: MemoryTransaction) -> None:
        """Publish what ``tx`` wrote (its commit; the caller holds the write lock)."""
        with self._data_lock:
            self._rows.update(tx.changes)
            self._fires.extend(tx.fires)
            self._declared.update(tx.declared)
        for apply in tx.on_commit:
            apply()

    def _change(self, rows: Sequence[ScheduledJob], **values: Any) -> list[ScheduledJob]:
        with self._write() as tx:
            for row in rows:
                tx.changes[row.id] = row.evolve(**values)
        return [tx.changes[r.id] for r in rows]

    # -- the port ----------------------------------------------------------------------------

    def transaction(self) -> contextlib.AbstractContextManager[JobTransaction]:
        return self._write()

    def connection(self) -> MemoryConnection:
        """A caller's transaction to pass as ``connection=`` (see :class:`MemoryConnection`)."""
        return MemoryConnection(self)

    @contextlib.contextmanager
    def join(self, connection: object) -> Iterator[JoinedTransaction]:
        """Write in the transaction of a :class:`MemoryConnection` of this store, which its owner
        commits or rolls back. Any other ``connection`` (app code that passes a database
        connection runs unchanged on the testing kit) gets a transaction of its own that ends
        with the block: it commits when the block ends normally, rolls back on an exception, and
        runs the ``when_done`` callbacks then."""
        if isinstance(connection, MemoryConnection):
            if connection.store is not self:
                raise TransactionNotJoinable("connection= is a MemoryConnection of another store")
            yield _Joined(*connection.transaction())
            return
        done: _Callbacks = []
        try:
            with self._write() as tx:
                yield _Joined(tx, done)
        except BaseException:
            _run(done, committed=False)
            raise
        _run(done, committed=True)

    def get(self, job_id: str) -> ScheduledJob | None:
        return self._committed(job_id)

    def list_jobs(self, query: JobQuery) -> list[ScheduledJob]:
        def keep(row: ScheduledJob) -> bool:
            meta = row.metadata
            return (
                (query.owner_id is None or meta.owner_id == query.owner_id)
                and (query.tenant_id is None or meta.tenant_id == query.tenant_id)
                and (query.topic is None or row.topic == query.topic)
                and (not query.statuses or row.status in query.statuses)
                and (not query.outcomes or row.last_outcome in query.outcomes)
                and (query.after_id is None or row.id > query.after_id)
            )

        return self._select(keep)[: query.limit]

    def claim_due(
        self, now: datetime, limit: int, worker_id: str, lease_until: datetime
    ) -> list[ScheduledJob]:
        with self._write_lock:
            due = self._select(lambda r: r.status is _PENDING and r.run_at <= now)
            due = concurrency.admitted(sorted(due, key=lambda r: (r.run_at, r.id)), self._running())[:limit]
            claimed = self._claim(due, now, worker_id, lease_until)
        return sorted(claimed, key=lambda j: (j.run_at, j.id))

    def claim_many(
        self,
        occurrences: Sequence[OccurrenceRef],
        now: datetime,
        worker_id: str,
        lease_until: datetime,
    ) -> list[ScheduledJob]:
        with self._write_lock:
            rows = []
            for job_id, occurrence, attempt in dict.fromkeys(occurrences):
                row = self._committed(job_id)
                if row is None or row.status is not _PENDING or row.run_at > now:
                    continue
                if (row.occurrence, row.attempt) == (occurrence, attempt):
                    rows.append(row)
            if any(r.concurrency is not None for r in rows):
                rows = concurrency.admitted(sorted(rows, key=lambda r: (r.run_at, r.id)), self._running())
            return self._claim(rows, now, worker_id, lease_until) if rows else []

    def _running(self) -> dict[str, int]:
        """The running fires per concurrency key (what a claim counts; under the write lock)."""
        return concurrency.running_per_key(
            r for r in self._snapshot().values() if r.status is _ACTIVE and r.concurrency is not None
        )

    def _claim(
        self, rows: Sequence[ScheduledJob], now: datetime, worker_id: str, lease_until: datetime
    ) -> list[ScheduledJob]:
        return self._change(
            rows,
            status=_ACTIVE,
            claimed_by=worker_id,
            claimed_until=lease_until.astimezone(UTC),
            updated_at=now.astimezone(UTC),
        )

    def _held(self, worker_id: str, job_ids: Sequence[str]) -> list[ScheduledJob]:
        wanted = set(job_ids)
        return self._select(lambda r: r.id in wanted and r.status is _ACTIVE and r.claimed_by == worker_id)

    def extend_claims(self, worker_id: str, job_ids: Sequence[str], lease_until: datetime) -> None:
        with self._write_lock:
            self._change(self._held(worker_id, job_ids), claimed_until=lease_until.astimezone(UTC))

    def release_claims(self, worker_id: str, job_ids: Sequence[str]) -> int:
        with self._write_lock:
            held = self._held(worker_id, job_ids)
            return len(self._change(held, status=_PENDING, claimed_by=None, claimed_until=None))

    def release_expired(self, now: datetime, limit: int) -> list[ScheduledJob]:
        with self._write_lock:
            expired = self._select(
                lambda r: r.status is _ACTIVE and r.claimed_until is not None and r.claimed_until < now
            )[:limit]
            return self._change(
                expired, status=_PENDING, claimed_by=None, claimed_until=None, updated_at=now.astimezone(UTC)
            )

    # -- WorkerRegistry ------------------------------------------------------------------------

    def beat(self, worker: WorkerInfo) -> None:
        with self._write_lock:
            known = self._workers.get(worker.id)
            if known is not None:
                worker = dataclasses.replace(
                    known,
                    last_beat=worker.last_beat,
                    in_flight=worker.in_flight,
                    stuck=worker.stuck,
                    clock_offset=worker.clock_offset,
                    clock_error=worker.clock_error,
                )
            self._workers[worker.id] = worker

    def store_clock(self) -> datetime | None:
        """None: the in-memory store's time is its process's."""
        return None

    def workers(self) -> list[WorkerInfo]:
        with self._write_lock:
            return sorted(self._workers.values(), key=lambda worker: worker.id)

    def remove_worker(self, worker_id: str) -> None:
        with self._write_lock:
            self._workers.pop(worker_id, None)

    def release_dead(
        self, beat_before: datetime, also: Sequence[str], now: datetime, limit: int
    ) -> list[ScheduledJob]:
        with self._write_lock:
            dead = {x.id for x in self._workers.values() if x.last_beat < beat_before or x.id in also}
            claimed = self._select(lambda r: r.status is _ACTIVE and r.claimed_by in dead)[:limit]
            return self._change(
                claimed, status=_PENDING, claimed_by=None, claimed_until=None, updated_at=now.astimezone(UTC)
            )

    def store_incarnation(self) -> str | None:
        return None  # no server: nothing it acknowledged is lost by a restart

    def claims_of(self, worker_id: str) -> list[OccurrenceRef]:
        claimed = self._select(lambda r: r.status is _ACTIVE and r.claimed_by == worker_id)
        return [(r.id, r.occurrence, r.attempt) for r in claimed]

    def release_claims_at(
        self, worker_id: str, claims: Sequence[OccurrenceRef], now: datetime
    ) -> list[ScheduledJob]:
        wanted = set(claims)
        with self._write_lock:
            claimed = self._select(
                lambda r: (
                    r.status is _ACTIVE
                    and r.claimed_by == worker_id
                    and (r.id, r.occurrence, r.attempt) in wanted
                )
            )
            return self._change(
                claimed, status=_PENDING, claimed_by=None, claimed_until=None, updated_at=now.astimezone(UTC)
            )

    def forget_workers(self, beat_before: datetime) -> int:
        with self._write_lock:
            gone = [x.id for x in self._workers.values() if x.last_beat < beat_before]
            for worker_id in gone:
                del self._workers[worker_id]
            return len(gone)

    def next_due_at(self, now: datetime | None = None) -> datetime | None:
        pending = [
            r.run_at
            for r in self._snapshot().values()
            if r.status is _PENDING and (now is None or r.concurrency is None or r.run_at > now)
        ]
        return min(pending, default=None)

    def scan_open(self, after_id: str | None, limit: int) -> list[ScheduledJob]:
        return self._select(
            lambda r: r.status in (_PENDING, _ACTIVE) and (after_id is None or r.id > after_id)
        )[:limit]

    def scan_pending_due(
        self, until: datetime, after: tuple[datetime, str] | None, limit: int
    ) -> list[OpenOccurrence]:
        due = sorted(
            (r for r in self._snapshot().values() if r.status is _PENDING and r.run_at <= until),
            key=lambda r: (r.run_at, r.id),
        )
        found = [r for r in due if after is None or (r.run_at, r.id) > after][:limit]
        return [OpenOccurrence(Occurrence.of(r), True) for r in found]

    def purge_finished(self, before: datetime, limit: int, *, wait: bool = False) -> int | None:
        # The write lock is the purge lock: a write transaction excludes every other writer.
        with self._write_lock:
            old = self._select(lambda r: r.status in FINISHED_STATUSES and r.updated_at < before)
            doomed = sorted(old, key=lambda r: (r.updated_at, r.id))[:limit]
            with self._data_lock:
                for row in doomed:
                    del self._rows[row.id]
        return len(doomed)

    # -- FireHistory ---------------------------------------------------------------------------

    def record_fires(self, tx: JobTransaction, fires: Sequence[FireRecord]) -> None:
        _own(self, tx, "record_fires").record_fires(fires)

    def history(self, job_id: str, limit: int, before: datetime | None = None) -> list[FireRecord]:
        with self._data_lock:
            mine = [
                (f.fired_at, n, f)
                for n, f in enumerate(self._fires)
                if f.job_id == job_id and (before is None or f.fired_at < before)
            ]
        return [f for _, _, f in sorted(mine, key=lambda e: e[:2], reverse=True)[:limit]]

    def purge_history(self, before: datetime, limit: int) -> int:
        with self._write_lock, self._data_lock:
            old = sorted((f for f in self._fires if f.fired_at < before), key=lambda f: f.fired_at)[:limit]
            doomed = {id(f) for f in old}
            self._fires = [f for f in self._fires if id(f) not in doomed]
        return len(old)

    # -- DeclaredRows --------------------------------------------------------------------------

    def lock(self, tx: JobTransaction) -> None:
        # A write transaction holds the write lock from begin to commit: syncs already take turns.
        _own(self, tx, "lock")

    def rows(self, tx: JobTransaction) -> list[tuple[StoredDeclaration, ScheduledJob | None]]:
        own = _own(self, tx, "rows")
        with self._data_lock:
            rows = {**self._declared, **own.declared}
        return [(row, own.get(row.job_id)) for _, row in sorted(rows.items())]

    def put(self, tx: JobTransaction, rows: Sequence[StoredDeclaration]) -> None:
        own = _own(self, tx, "put")
        own.declared.update({row.name: _stored(row) for row in rows})

    def read(self) -> list[tuple[StoredDeclaration, ScheduledJob | None]]:
        with self._data_lock:
            pairs = [(row, self._rows.get(row.job_id)) for _, row in sorted(self._declared.items())]
        return pairs

    def watch(
        self,
        on_change: Callable[[datetime | None], None],
        on_slot_freed: Callable[[], None] | None = None,
    ) -> Callable[[], None]:
        """No other process can write to this store, so there is nothing to watch."""
        return lambda: None

    def close(self) -> None:
        return None
