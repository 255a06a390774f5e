"""``SQLAlchemyJobStore``: the job store on SQLite or PostgreSQL (SQLAlchemy Core, statements only).

The store itself is the :class:`~schedule_sdk.ports.JobStore` port: write transactions, reads and
claims. Its capabilities are objects of their own, each in its module, sharing the store's
:class:`~.connections.Connections`: :attr:`~SQLAlchemyJobStore.joins` (:mod:`.joined`),
:attr:`~SQLAlchemyJobStore.registry` (:mod:`.workers`), :attr:`~SQLAlchemyJobStore.fire_history`
(:mod:`.history`), :attr:`~SQLAlchemyJobStore.retention` (:mod:`.retention`),
:attr:`~SQLAlchemyJobStore.reads` (:mod:`.operator_reads`) and :attr:`~SQLAlchemyJobStore.declared`
(:mod:`.declared`); :meth:`~SQLAlchemyJobStore.capability` hands each out
(:func:`schedule_sdk.ports.provided`, :func:`schedule_sdk.ports.require`). The claims of the fire
path run through the driver-level code of :mod:`.fast`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from schedule_sdk.adapters.sql import watch
from schedule_sdk.adapters.sql.connections import Connections, OneConnection
from schedule_sdk.adapters.sql.declared import SQLAlchemyDeclaredRows
from schedule_sdk.adapters.sql.due_scan import SQLDueScan
from schedule_sdk.adapters.sql.engine import transaction_pooled, translate_errors
from schedule_sdk.adapters.sql.fast import pg_claims, sqlite_claims
from schedule_sdk.adapters.sql.fast.writes import EXTEND_PG, FIRE_TIME
from schedule_sdk.adapters.sql.history import SQLFireHistory
from schedule_sdk.adapters.sql.joined import SQLJoins
from schedule_sdk.adapters.sql.operator_reads import SQLOperatorReads
from schedule_sdk.adapters.sql.retention import PURGE_LOCK_KEY, SQLRetention
from schedule_sdk.adapters.sql.rows import from_row, sorted_jobs, to_row
from schedule_sdk.adapters.sql.statements import (
    ACTIVE,
    ANY_EXPIRED,
    CLAIM_DUE,
    CLAIM_KEYED,
    CLAIM_KEYED_MANY,
    CLAIM_MANY,
    NEXT_DUE,
    NEXT_DUE_UNWAITING,
    NEXT_PLAN,
    NO_FLUSH_WAIT,
    OPEN_OCCURRENCES,
    PENDING,
    STILL_CLAIMED,
    list_statement,
    once,
)
from schedule_sdk.adapters.sql.tables import UTCDateTime
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.adapters.sql.transaction import SQLTransaction
from schedule_sdk.adapters.sql.workers import SQLWorkerRegistry
from schedule_sdk.domain.jobs import JobQuery, ScheduledJob
from schedule_sdk.ports import (
    DeclaredRows,
    DueClaim,
    DueScan,
    FireHistory,
    JobStore,
    JobTransaction,
    JoinableStore,
    KeyLoad,
    Occurrence,
    OccurrenceRef,
    OpenOccurrence,
    OperatorReads,
    RestartRepair,
    Retention,
    TopicBacklog,
    WorkerRegistry,
)

__all__ = [
    "NOTIFY_CHANNEL",
    "PURGE_LOCK_KEY",
    "ConnectionJobStore",
    "SQLAlchemyJobStore",
    "from_row",
    "list_statement",
    "to_row",
]

NOTIFY_CHANNEL = "schedule_sdk_jobs"

_T = TypeVar("_T")
#: How long after rows with a concurrency key were last due a PostgreSQL claim keeps claiming them
#: with the rest in one round trip (rather than asking first whether any is due).
_KEYED_PIPELINE_SECONDS = 60.0
#: The poller's claims on SQLite, compiled once (:mod:`.fast.sqlite_claims`).
_DRIVER_DUE = sqlite_claims.DriverClaim(CLAIM_DUE)
_DRIVER_KEYED = sqlite_claims.DriverClaim(CLAIM_KEYED)
#: SQLite: after a claim, when to claim next and whether rows with a key are left waiting.
_DRIVER_PLAN = sqlite_claims.DriverPlan(NEXT_PLAN)
#: SQLite: whether a row is still as its claim returned it (:meth:`SQLAlchemyJobStore.still_claimed`).
_DRIVER_STILL_CLAIMED = sqlite_claims.DriverProbe(STILL_CLAIMED)


def _probe(job: ScheduledJob) -> dict[str, Any]:
    """The parameters of ``_DRIVER_STILL_CLAIMED`` for ``job``."""
    return {
        "s_id": job.id,
        "s_worker": job.claimed_by,
        "s_occurrence": job.occurrence,
        "s_attempt": job.attempt,
    }


class SQLAlchemyJobStore(JobStore):
    """The job store on SQLite (file) or PostgreSQL, with every capability (composed: see the
    module). Create the schema with :func:`schedule_sdk.adapters.sql.schema.upgrade` (the container
    does it at start-up)."""

    def __init__(
        self, engine: Engine, *, notify_channel: str = NOTIFY_CHANNEL, listen_url: str | None = None
    ) -> None:
        """``listen_url``: a direct PostgreSQL URL for :meth:`watch`'s ``LISTEN`` (default: the
        engine's own, unless the engine is behind a transaction pooler: then no ``LISTEN``)."""
        self._compose(Connections(engine), notify_channel, listen_url)

    def _compose(self, connections: Connections, channel: str, listen_url: str | None) -> None:
        self.connections = connections
        self._channel = channel
        self._listen_url = listen_url
        #: Until when a claim takes rows with a concurrency key first (monotonic clock).
        self._keyed_until = 0.0
        self.joins = SQLJoins(connections.engine)
        self.registry = SQLWorkerRegistry(connections)
        self.fire_history = SQLFireHistory(connections)
        self.retention = SQLRetention(connections)
        self.reads = SQLOperatorReads(connections.engine)
        self.declared = SQLAlchemyDeclaredRows(connections.engine)
        self.due_scan = SQLDueScan(connections)
        self._capabilities: dict[type, object] = {
            JoinableStore: self.joins,
            DueScan: self.due_scan,
            WorkerRegistry: self.registry,
            RestartRepair: self.registry,
            FireHistory: self.fire_history,
            Retention: self.retention,
            OperatorReads: self.reads,
            DeclaredRows: self.declared,
        }

    @property
    def engine(self) -> Engine:
        """The engine of the store's database."""
        return self.connections.engine

    def capability(self, port: type[_T]) -> _T | None:
        """The composed object that implements ``port`` (every capability), else None."""
        found = self._capabilities.get(port)
        return cast(_T, found) if found is not None else super().capability(port)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[JobTransaction]:
        with self.connections.write() as conn:
            yield SQLTransaction(conn)

    @contextlib.contextmanager
    def outcome_transaction(self) -> Iterator[JobTransaction]:
        """On PostgreSQL its commit does not wait for the WAL flush (``SET LOCAL``: this
        transaction only, so it also holds behind a transaction pooler)."""
        with self.connections.write() as conn:
            if self.connections.is_pg:
                conn.execute(NO_FLUSH_WAIT)
            yield SQLTransaction(conn)

    def lock_writes(self, *, wait: bool = True) -> contextlib.AbstractContextManager[bool]:
        """Hold this process's writer lock (SQLite; nothing to hold on PostgreSQL) for the block;
        yields whether it is held (without ``wait``, False when another thread has it)."""
        return self.connections.lock_writes(wait=wait)

    def get(self, job_id: str) -> ScheduledJob | None:
        with self.connections.read() as conn:
            row = conn.execute(sa.select(t).where(t.c.id == job_id)).mappings().first()
        return None if row is None else from_row(row)

    def still_claimed(self, job: ScheduledJob) -> bool:
        """One read of the row's key columns: on PostgreSQL one statement in autocommit on the
        claims' pool, on SQLite a read transaction (never the writer's turn)."""
        if self.connections.claims is not None:
            params = {"id": job.id, "worker": job.claimed_by, "occurrence": job.occurrence}
            params["attempt"] = job.attempt
            return pg_claims.still_claimed(self.connections.claims, params)
        if self.connections.writers is None:  # one given connection (the asyncio service's)
            return super().still_claimed(job)
        with self.connections.read() as conn:
            return _DRIVER_STILL_CLAIMED.found(conn, _probe(job))

    def still_claimed_many(self, jobs: Sequence[ScheduledJob]) -> list[bool]:
        """On PostgreSQL one statement in autocommit on the claims' pool, on SQLite one read
        transaction."""
        if not jobs:
            return []
        if self.connections.claims is not None:
            params = {
                "ids": [job.id for job in jobs],
                "workers": [job.claimed_by for job in jobs],
                "occurrences": [job.occurrence for job in jobs],
                "attempts": [job.attempt for job in jobs],
            }
            held = pg_claims.still_claimed_many(self.connections.claims, params)
            return [n in held for n in range(1, len(jobs) + 1)]
        if self.connections.writers is None:  # one given connection (the asyncio service's)
            return super().still_claimed_many(jobs)
        with self.connections.read() as conn:
            return [_DRIVER_STILL_CLAIMED.found(conn, _probe(job)) for job in jobs]

    def list_jobs(self, query: JobQuery) -> list[ScheduledJob]:
        with self.connections.read() as conn:
            return [from_row(r) for r in conn.execute(list_statement(query)).mappings()]

    def claim_due(
        self, now: datetime, limit: int, worker_id: str, lease_until: datetime
    ) -> list[ScheduledJob]:
        return self._claim_due(now, limit, worker_id, lease_until, planned=False).jobs

    def claim_due_planned(self, now: datetime, limit: int, worker_id: str, lease_until: datetime) -> DueClaim:
        """One round trip on PostgreSQL (the claim statement also reads the next due instant;
        rows another claim is taking are left out), one write transaction on SQLite."""
        return self._claim_due(now, limit, worker_id, lease_until, planned=True)

    def _claim_due(
        self, now: datetime, limit: int, worker_id: str, lease_until: datetime, *, planned: bool
    ) -> DueClaim:
        if self.connections.claims is not None:
            params = {"now": now, "worker": worker_id, "lease": lease_until, "limit": limit}
            rows: list[dict[str, Any]] = []
            if time.monotonic() >= self._keyed_until:  # no keyed row lately: the plain claim
                rows, waiting, next_due = pg_claims.claim_due(self.connections.claims, params)
                if not waiting or len(rows) >= limit:
                    return DueClaim(sorted_jobs(rows), None if len(rows) >= limit else next_due, waiting)
                params["limit"] = limit - len(rows)
            # rows with a key are due: both claims in one transaction, one round trip
            more, waiting, next_due = pg_claims.claim_keyed_first(self.connections.claims, params)
            if waiting or any(row["concurrency_key"] is not None for row in more):
                self._keyed_until = time.monotonic() + _KEYED_PIPELINE_SECONDS  # so for a while
            rows += more
            return DueClaim(sorted_jobs(rows), None if len(rows) >= limit else next_due, waiting)
        params = {"c_now": now, "c_worker": worker_id, "c_lease": lease_until, "c_limit": limit}
        with self.connections.claiming() as conn:  # SQLite: as _claim, through the compiled driver statements
            rows = _DRIVER_DUE.run(conn, params)
            if len(rows) < limit:
                params["c_limit"] = limit - len(rows)
                rows += _DRIVER_KEYED.run(conn, params)
            if len(rows) >= limit or not planned:
                return DueClaim(sorted_jobs(rows), None)
            next_due, waiting = _DRIVER_PLAN.plan(conn, {"n_now": now})
        return DueClaim(sorted_jobs(rows), next_due, waiting)

    def claim_many(
        self,
        occurrences: Sequence[OccurrenceRef],
        now: datetime,
        worker_id: str,
        lease_until: datetime,
    ) -> list[ScheduledJob]:
        if not occurrences:
            return []
        keys = [tuple(o) for o in dict.fromkeys(occurrences)]
        if self.connections.claims is not None:
            ids, numbers, attempts = (list(column) for column in zip(*keys, strict=True))
            params = {"now": now, "worker": worker_id, "lease": lease_until}
            params.update(ids=ids, occurrences=numbers, attempts=attempts)
            rows = pg_claims.claim(self.connections.claims, pg_claims.CLAIM_MANY, params)
            if len(rows) < len(keys):  # some may have a concurrency key
                params["limit"] = len(keys) - len(rows)
                rows += pg_claims.claim_keyed(
                    self.connections.claims, pg_claims.LOCK_KEYS_OF_HANDED, pg_claims.CLAIM_KEYED_MANY, params
                )
            return sorted_jobs(rows)
        params = {"c_ids": [key[0] for key in keys], "c_keys": keys}
        return self._claim(CLAIM_MANY, CLAIM_KEYED_MANY, len(keys), now, worker_id, lease_until, **params)

    def _claim(
        self,
        statement: sa.Update,
        keyed: sa.Update,
        limit: int,
        now: datetime,
        worker_id: str,
        lease_until: datetime,
        **params: Any,
    ) -> list[ScheduledJob]:
        """SQLite: the claim of rows without a key and, with the room left, of those with one, in
        one write transaction."""
        params.update(c_now=now, c_worker=worker_id, c_lease=lease_until, c_limit=limit)
        with self.connections.claiming() as conn:
            rows = list(conn.execute(statement, params).mappings().all())
            if len(rows) < limit:
                params["c_limit"] = limit - len(rows)
                rows += conn.execute(keyed, params).mappings().all()
        return sorted_jobs(rows)

    def extend_claims(self, worker_id: str, job_ids: Sequence[str], lease_until: datetime) -> None:
        if not job_ids:
            return
        if self.connections.is_pg:  # one array parameter: a worker holding 2,000 fires binds 2,000 ids
            with self.connections.write() as conn:
                until = FIRE_TIME.process_bind_param(lease_until, conn.dialect)
                conn.exec_driver_sql(EXTEND_PG, (worker_id, list(job_ids), until))
            return
        statement = (
            sa.update(t)
            .where(t.c.claimed_by == worker_id, t.c.status == "active", t.c.id.in_(list(job_ids)))
            .values(claimed_until=lease_until)
        )
        with self.connections.write() as conn:
            conn.execute(statement)

    def release_claims(self, worker_id: str, job_ids: Sequence[str]) -> int:
        if not job_ids:
            return 0
        statement = (
            sa.update(t)
            .where(t.c.claimed_by == worker_id, t.c.status == "active", t.c.id.in_(list(job_ids)))
            .values(status="pending", claimed_by=None, claimed_until=None)
        )
        with self.connections.write() as conn:
            return int(conn.execute(statement).rowcount)

    def release_expired(self, now: datetime, limit: int) -> list[ScheduledJob]:
        # A read first: most calls find nothing, and a read takes no writer turn, writes no log
        # and (SQLite) leaves nothing to checkpoint. A lease ending after it is the next call's.
        with self.connections.peek() as conn:
            if conn.execute(ANY_EXPIRED, {"c_now": now}).first() is None:
                return []
        expired = (
            sa.select(t.c.id)
            .where(ACTIVE, t.c.claimed_until < now)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        statement = (
            sa.update(t)
            .where(t.c.id.in_(once(expired)), ACTIVE, t.c.claimed_until < now)
            .values(status="pending", claimed_by=None, claimed_until=None, updated_at=now)
            .returning(*t.c)
        )
        with self.connections.write() as conn:
            rows = conn.execute(statement).mappings().all()
        return [from_row(r) for r in rows]

    def warm(self) -> None:
        """PostgreSQL: open a session of the claims' pool (its connection and start-up would
        otherwise fall on the first claim, and with it on the first fire)."""
        if self.connections.claims is None:
            return
        with translate_errors(), self.connections.claims.connect() as conn:
            conn.exec_driver_sql("SELECT 1")

    def quiesce(self) -> None:
        """SQLite: end the checkpointer's thread (:meth:`.checkpoints.Checkpointer.rest`)."""
        if self.connections.checkpoints is not None:
            self.connections.checkpoints.rest()

    def backlog(self, now: datetime) -> list[TopicBacklog]:
        is_due = t.c.run_at <= sa.bindparam("now", now, type_=UTCDateTime)
        statement = (
            sa.select(
                t.c.topic,
                sa.func.count(),
                sa.func.coalesce(sa.func.sum(sa.case((is_due, 1), else_=0)), 0),
                sa.type_coerce(sa.func.min(sa.case((is_due, t.c.run_at))), UTCDateTime),
            )
            .where(PENDING)
            .group_by(t.c.topic)
            .order_by(t.c.topic)
        )
        with self.connections.read() as conn:
            rows = conn.execute(statement).all()
        return [TopicBacklog(topic, int(n), int(due), oldest) for topic, n, due, oldest in rows]

    def next_due_at(self, now: datetime | None = None) -> datetime | None:
        statement, params = (NEXT_DUE, {}) if now is None else (NEXT_DUE_UNWAITING, {"n_now": now})
        with (
            self.connections.claiming()
            if self.connections.claims is not None
            else self.connections.read() as conn
        ):
            value = conn.execute(statement, params).scalar()
        return value if isinstance(value, datetime) or value is None else None

    def concurrency_load(self, now: datetime) -> list[KeyLoad]:
        """One query over the keyed partial indexes."""
        is_active = t.c.status == sa.literal_column("'active'")
        is_waiting = sa.and_(PENDING, t.c.run_at <= sa.bindparam("now", now, type_=UTCDateTime))
        statement = (
            sa.select(
                t.c.concurrency_key,
                sa.func.max(t.c.concurrency_limit),
                sa.func.coalesce(sa.func.sum(sa.case((is_active, 1), else_=0)), 0),
                sa.func.coalesce(sa.func.sum(sa.case((is_waiting, 1), else_=0)), 0),
                sa.type_coerce(sa.func.min(sa.case((is_waiting, t.c.run_at))), UTCDateTime),
            )
            .where(t.c.concurrency_key.is_not(None), t.c.status.in_(["pending", "active"]))
            .group_by(t.c.concurrency_key)
            .order_by(t.c.concurrency_key)
        )
        with self.connections.read() as conn:
            rows = conn.execute(statement).all()
        return [
            KeyLoad(key, int(limit), int(running), int(waiting), oldest)
            for key, limit, running, waiting, oldest in rows
        ]

    def scan_open(self, after_id: str | None, limit: int) -> list[ScheduledJob]:
        statement = sa.select(t).where(t.c.status.in_(["pending", "active"])).order_by(t.c.id).limit(limit)
        if after_id is not None:
            statement = statement.where(t.c.id > after_id)
        with self.connections.read() as conn:
            return [from_row(r) for r in conn.execute(statement).mappings()]

    def scan_open_occurrences(self, after_id: str | None, limit: int) -> list[OpenOccurrence]:
        statement = OPEN_OCCURRENCES.limit(limit)
        if after_id is not None:
            statement = statement.where(t.c.id > after_id)
        with self.connections.read() as conn:
            rows = conn.execute(statement).all()
        return [
            OpenOccurrence(Occurrence(job_id, occurrence, attempt, run_at), status == "pending")
            for job_id, status, occurrence, attempt, run_at in rows
        ]

    def watch(
        self,
        on_change: Callable[[datetime | None], None],
        on_slot_freed: Callable[[], None] | None = None,
    ) -> Callable[[], None]:
        """PostgreSQL: ``LISTEN`` on the listen URL, after checking that a notification sent there
        is delivered (:func:`.watch.check_listen`), a freed slot announced as such (migration
        0023); behind a transaction pooler without a listen URL, nothing (the poller polls).
        SQLite: ``data_version`` (any commit of another connection, as ``on_change(None)``).

        :raises ListenNotDelivered: a notification was not delivered on the listen connection."""
        if not self.connections.is_pg:
            return watch.poll_sqlite_data_version(
                self.engine.url, on_change, others=self.connections.others_version
            )
        if self._listen_url is not None:
            url = sa.make_url(self._listen_url)
        elif transaction_pooled(self.engine):
            return lambda: None  # wake-ups by polling: LISTEN cannot work through the pooler
        else:
            url = self.engine.url
        watch.check_listen(url)
        return watch.listen_postgres(url, self._channel, on_change, on_slot_freed)

    def close(self) -> None:
        self.connections.close()


class ConnectionJobStore(SQLAlchemyJobStore):
    """The store's reads and writes, on one given connection (the asyncio service runs the sync
    code in SQLAlchemy's greenlet bridge over an ``AsyncConnection``: the same statements, async
    I/O). Only what :class:`~schedule_sdk.core.service.ScheduleService` calls is meant to be used."""

    def __init__(self, conn: Connection, home: Engine) -> None:  # no engines of its own
        self._compose(OneConnection(conn, home), NOTIFY_CHANNEL, None)
