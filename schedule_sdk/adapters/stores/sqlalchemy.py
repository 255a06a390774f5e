"""``SQLAlchemyJobStore``: the job store on SQLite or PostgreSQL (SQLAlchemy Core, statements only)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import operator
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection, Dialect, Engine

from schedule_sdk.adapters.stores import (
    bulk,
    django,
    fire_minutes,
    joined,
    pg_claims,
    sessions,
    sqlite_claims,
    watch,
)
from schedule_sdk.adapters.stores.checkpoints import Checkpointer
from schedule_sdk.adapters.stores.engine import (
    WRITE,
    application_name_of,
    make_engine,
    pooled_options,
    transaction_pooled,
    translate_errors,
)
from schedule_sdk.adapters.stores.operator_reads import SQLOperatorReads
from schedule_sdk.adapters.stores.tables import (
    FINISHED_CONDITION,
    KEYED_PENDING_CONDITION,
    NOT_PENDING_CONDITION,
    UTCDateTime,
)
from schedule_sdk.adapters.stores.tables import schedule_fires as fires
from schedule_sdk.adapters.stores.tables import schedule_jobs as t
from schedule_sdk.adapters.stores.tables import schedule_workers as w
from schedule_sdk.domain.calendars import Calendar
from schedule_sdk.domain.errors import ClientRequestIdInUse
from schedule_sdk.domain.history import FireOutcome, FireRecord
from schedule_sdk.domain.jobs import (
    FIRE_ONCE,
    MUTABLE_FIELDS,
    ConcurrencyLimit,
    JobMetadata,
    JobQuery,
    MisfirePolicy,
    Repeat,
    RetryPolicy,
    ScheduledJob,
    encode_json,
    repeat_from_dict,
    repeated_request_id,
)
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.time_limits import limit_ms
from schedule_sdk.ports import (
    DueClaim,
    FireHistory,
    Guard,
    JobStore,
    JobTransaction,
    JoinableStore,
    JoinedTransaction,
    KeyLoad,
    Occurrence,
    OccurrenceRef,
    OpenOccurrence,
    Retention,
    TopicBacklog,
    WorkerInfo,
    WorkerRegistry,
)

NOTIFY_CHANNEL = "schedule_sdk_jobs"


def to_row(job: ScheduledJob) -> dict[str, Any]:
    """The column values for ``job``."""
    meta = job.metadata
    return {
        "id": job.id,
        "topic": job.topic,
        "status": job.status.value,
        "run_at": job.run_at,
        "scheduled_for": job.scheduled_for,
        "timezone": job.timezone,
        "payload": None if job.payload is None else encode_json(job.payload),
        "owner_id": meta.owner_id,
        "tenant_id": meta.tenant_id,
        "correlation_id": meta.correlation_id,
        "client_request_id": meta.client_request_id,
        "repeat": None if job.repeat is None else _policy_json(job.repeat),
        "retry": _policy_json(job.retry),
        "occurrence": job.occurrence,
        "attempt": job.attempt,
        "occurrence_count": job.occurrence_count,
        "repeat_limit": job.limit,
        "ends_at": job.ends_at,
        "last_fired_at": job.last_fired_at,
        "last_error": job.last_error,
        "claimed_by": job.claimed_by,
        "claimed_until": job.claimed_until,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "rescheduled_from": job.rescheduled_from,
        "rescheduled_to": job.rescheduled_to,
        "misfire": None if job.misfire == FIRE_ONCE else _policy_json(job.misfire),
        "regular_due": job.regular_due,
        "trace_context": job.trace_context,
        "concurrency_key": None if job.concurrency is None else job.concurrency.key,
        "concurrency_limit": None if job.concurrency is None else job.concurrency.limit,
        "overlap": job.overlap,
        "time_limit_ms": None if job.time_limit is None else limit_ms(job.time_limit),
        "spread_ms": job.spread_ms,
        "spread_offset_ms": job.spread_offset_ms or None,
        "jitter_ms": job.jitter_ms,
        "calendar": None if job.calendar is None else json.dumps(job.calendar.to_dict()),
        "run_of": job.run_of,
    }


@functools.lru_cache(maxsize=1024)
def _policy_json(policy: Repeat | RetryPolicy | MisfirePolicy) -> str:
    """The stored JSON of a (frozen, hashable) policy: most jobs share a few, so each is encoded once."""
    return json.dumps(policy.to_dict())


def from_row(row: Mapping[Any, Any]) -> ScheduledJob:
    """The job stored in ``row``."""
    return ScheduledJob(
        id=row["id"],
        topic=row["topic"],
        status=JobStatus(row["status"]),
        run_at=row["run_at"],
        scheduled_for=row["scheduled_for"],
        timezone=row["timezone"],
        payload=None if row["payload"] is None else json.loads(row["payload"]),
        metadata=_metadata(
            row["owner_id"], row["tenant_id"], row["correlation_id"], row["client_request_id"]
        ),
        repeat=None if row["repeat"] is None else _repeat(row["repeat"]),
        retry=_retry(row["retry"]),
        occurrence=row["occurrence"],
        attempt=row["attempt"],
        occurrence_count=row["occurrence_count"],
        limit=row["repeat_limit"],
        ends_at=row["ends_at"],
        last_fired_at=row["last_fired_at"],
        last_error=row["last_error"],
        claimed_by=row["claimed_by"],
        claimed_until=row["claimed_until"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        rescheduled_from=row["rescheduled_from"],
        rescheduled_to=row["rescheduled_to"],
        misfire=FIRE_ONCE if row["misfire"] is None else _misfire(row["misfire"]),
        regular_due=row["regular_due"],
        trace_context=row["trace_context"],
        concurrency=_concurrency(row["concurrency_key"], row["concurrency_limit"]),
        overlap=row["overlap"],
        time_limit=None if row["time_limit_ms"] is None else timedelta(milliseconds=row["time_limit_ms"]),
        spread_ms=row["spread_ms"],
        spread_offset_ms=row["spread_offset_ms"] or 0,
        jitter_ms=row["jitter_ms"],
        calendar=None if row["calendar"] is None else Calendar.from_dict(json.loads(row["calendar"])),
        run_of=row["run_of"],
    )


_NO_METADATA = JobMetadata()


def _metadata(
    owner_id: str | None, tenant_id: str | None, correlation_id: str | None, client_request_id: str | None
) -> JobMetadata:
    """A row's metadata (the many rows without any share one value)."""
    if owner_id is None and tenant_id is None and correlation_id is None and client_request_id is None:
        return _NO_METADATA
    return JobMetadata(
        owner_id=owner_id,
        tenant_id=tenant_id,
        correlation_id=correlation_id,
        client_request_id=client_request_id,
    )


# The stored policies: most rows share a few (frozen values), so each text is parsed once.
@functools.lru_cache(maxsize=1024)
def _repeat(text: str) -> Repeat:
    return repeat_from_dict(json.loads(text))


@functools.lru_cache(maxsize=1024)
def _retry(text: str) -> RetryPolicy:
    return RetryPolicy.from_dict(json.loads(text))


@functools.lru_cache(maxsize=1024)
def _misfire(text: str) -> MisfirePolicy:
    return MisfirePolicy.from_dict(json.loads(text))


@functools.lru_cache(maxsize=1024)
def _concurrency(key: str | None, limit: int | None) -> ConcurrencyLimit | None:
    """The stored limit of a row (most rows share a few: each is built once)."""
    return None if key is None or limit is None else ConcurrencyLimit(key=key, limit=limit)


# -- fire history ------------------------------------------------------------------------------

_FIRE_FIELDS = tuple(c.name for c in fires.c if c.name != "id")
_FIRE_TIME = UTCDateTime()


@functools.cache
def _insert_fires(paramstyle: str) -> str:
    """The driver-level INSERT of one history entry: every fire writes one, and executemany of
    plain tuples costs about a third less per row than a Core insert's per-row bind processing
    (measured on SQLite: 14 vs 20 us)."""
    mark = "?" if paramstyle == "qmark" else "%s"
    columns = ", ".join(_FIRE_FIELDS)
    return f"INSERT INTO {fires.name} ({columns}) VALUES ({', '.join(mark for _ in _FIRE_FIELDS)})"


def fire_params(fire: FireRecord, dialect: Dialect) -> tuple[Any, ...]:
    """The column values of a fire history entry, in ``_FIRE_FIELDS`` order, as the driver takes them."""
    to_db = _FIRE_TIME.process_bind_param
    return (
        fire.job_id,
        fire.topic,
        fire.occurrence,
        fire.attempt,
        to_db(fire.due_at, dialect),
        to_db(fire.fired_at, dialect),
        fire.lateness_ms,
        fire.duration_ms,
        fire.outcome.value,
        fire.error,
        fire.worker_id,
        fire.traceback,
    )


def fire_from_row(row: Mapping[Any, Any]) -> FireRecord:
    """The fire history entry stored in ``row``."""
    values = {name: row[name] for name in _FIRE_FIELDS}
    values["outcome"] = FireOutcome(values["outcome"])
    return FireRecord(**values)


# ---------------------------------------------------------------------------------------------


def _guarded(statuses: frozenset[JobStatus], checks_claim: bool) -> list[sa.ColumnElement[bool]]:
    # Statuses as SQL literals (fixed enum strings): an expanding IN parameter cannot be used
    # with executemany, which update_many relies on.
    #
    # The status is compared through a no-op expression (the column is NOT NULL) that no partial
    # index's condition matches: on the column itself, PostgreSQL's planner could prove a partial
    # index of active rows usable and, when its statistics count few active rows (a fresh table,
    # any burst), walk every row held by the worker for each outcome instead of reading the
    # primary key (test_postgres_query_plans checks the plan; W2 lost half its rate to it).
    literals: list[sa.ColumnElement[Any]] = [sa.literal_column(f"'{s.value}'") for s in sorted(statuses)]
    clauses = [
        t.c.id == sa.bindparam("b_id"),
        sa.func.coalesce(t.c.status, sa.literal_column("''")).in_(literals),
    ]
    if checks_claim:
        clauses += [
            t.c.claimed_by == sa.bindparam("b_claimed_by"),
            t.c.occurrence == sa.bindparam("b_occurrence"),
        ]
    return clauses


def _update_params(job: ScheduledJob, guard: Guard) -> dict[str, Any]:
    row = to_row(job)
    params = {f"v_{name}": row[name] for name in MUTABLE_FIELDS}
    params.update(b_id=job.id, b_claimed_by=guard.claimed_by, b_occurrence=guard.occurrence)
    return params


#: PostgreSQL's lease renewal (the heartbeat's, for every fire the worker holds).
#: Rows another transaction holds (the worker's own recorder, completing them) are skipped, not
#: waited for: waiting could deadlock with a recorder locking the same rows in another order.
_EXTEND_PG = (
    f"WITH held AS MATERIALIZED (SELECT id FROM {t.name} "
    "WHERE claimed_by = %s AND status = 'active' AND id = ANY(%s::varchar[]) FOR UPDATE SKIP LOCKED) "
    f"UPDATE {t.name} s SET claimed_until = %s FROM held WHERE s.id = held.id"
)
#: The mutable columns whose values are datetimes (bound through ``UTCDateTime``).
_UTC_MUTABLE = frozenset(name for name in MUTABLE_FIELDS if isinstance(t.c[name].type, UTCDateTime))


@functools.cache
def _update_sql(statuses: frozenset[JobStatus], checks_claim: bool, paramstyle: str) -> str:
    """:func:`_update_statement` as driver-level SQL with positional parameters (the mutable
    values in ``MUTABLE_FIELDS`` order, then the id, then, with ``checks_claim``, the claimer and
    the occurrence): every fire's outcome is written with it, and an ``executemany`` of plain
    tuples skips the Core's per-row bind processing, which was the larger part of the
    recorder's CPU in a burst."""
    mark = "?" if paramstyle == "qmark" else "%s"
    values = ", ".join(f"{name} = {mark}" for name in MUTABLE_FIELDS)
    literals = ", ".join(f"'{s.value}'" for s in sorted(statuses))
    where = f"id = {mark} AND coalesce(status, '') IN ({literals})"  # see _guarded
    if checks_claim:
        where += f" AND claimed_by = {mark} AND occurrence = {mark}"
    return f"UPDATE {t.name} SET {values} WHERE {where}"


#: The mutable fields of a job, read in one call (each is its own column, the status as its value).
_MUTABLE_OF = operator.attrgetter(*MUTABLE_FIELDS)
_STATUS_AT = MUTABLE_FIELDS.index("status")


def _update_values(job: ScheduledJob, guard: Guard, dialect: Dialect) -> tuple[Any, ...]:
    """The parameters of :func:`_update_sql` for ``job`` under ``guard``: only the mutable
    columns are read (not :func:`to_row`'s whole row, whose payload and policies are encoded)."""
    to_db = _FIRE_TIME.process_bind_param
    values = [
        to_db(value, dialect) if name in _UTC_MUTABLE else value
        for name, value in zip(MUTABLE_FIELDS, _MUTABLE_OF(job), strict=True)
    ]
    values[_STATUS_AT] = job.status.value
    values.append(job.id)
    if guard.claimed_by is not None:
        values += [guard.claimed_by, guard.occurrence]
    return tuple(values)


@functools.cache
def _update_statement(statuses: frozenset[JobStatus], checks_claim: bool) -> sa.Update:
    """The guarded update of one row, one statement per guard shape (built once: every fire's
    outcome is written with it)."""
    values = {name: sa.bindparam(f"v_{name}", type_=t.c[name].type) for name in MUTABLE_FIELDS}
    return sa.update(t).where(*_guarded(statuses, checks_claim)).values(values)


def _once(ids: sa.Select[Any]) -> sa.Select[Any]:
    """``ids`` (a limited ``SELECT ... FOR UPDATE SKIP LOCKED``) evaluated once, as a CTE: as a plain
    ``IN (subquery)`` PostgreSQL may rescan it per outer row (nested-loop semi join) and, since rows
    updated meanwhile are skipped, return more than ``LIMIT`` rows in all."""
    chosen = ids.cte()
    return sa.select(chosen.c.id)


class _Transaction(JobTransaction):
    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    @property
    def connection(self) -> Connection:
        """The transaction's connection, for modules that keep their own tables in the same
        database and must write them atomically with job rows (the timer)."""
        return self._conn

    def insert(self, job: ScheduledJob) -> None:
        # On PostgreSQL a trigger (migration 0001) notifies NOTIFY_CHANNEL on commit.
        bulk.insert_rows(self._conn, [to_row(job)])

    def insert_many(self, jobs: Sequence[ScheduledJob]) -> None:
        repeated = repeated_request_id(jobs)
        if repeated is not None:
            raise ClientRequestIdInUse(repeated[0][1], repeated[0][0])
        bulk.insert_rows(self._conn, [to_row(job) for job in jobs])

    def get(self, job_id: str, *, for_update: bool = False) -> ScheduledJob | None:
        query = sa.select(t).where(t.c.id == job_id)
        if for_update:
            query = query.with_for_update()
        with translate_errors():
            row = self._conn.execute(query).mappings().first()
        return None if row is None else from_row(row)

    def update(self, job: ScheduledJob, guard: Guard) -> bool:
        with translate_errors():
            statement = _update_statement(guard.statuses, guard.claimed_by is not None)
            result = self._conn.execute(statement, _update_params(job, guard))
        return result.rowcount == 1

    def update_many(self, changes: Sequence[tuple[ScheduledJob, Guard]]) -> None:
        # One executemany per statement shape (the guard's statuses and whether it checks a claim).
        batches: dict[tuple[frozenset[JobStatus], bool], list[tuple[Any, ...]]] = {}
        dialect = self._conn.dialect
        for job, guard in changes:
            key = (guard.statuses, guard.claimed_by is not None)
            batches.setdefault(key, []).append(_update_values(job, guard, dialect))
        with translate_errors():
            for (statuses, checks_claim), params in batches.items():
                sql = _update_sql(statuses, checks_claim, str(dialect.paramstyle))
                self._conn.exec_driver_sql(sql, params)

    def waiting(self, keys: Sequence[str], now: datetime, per_key: int) -> list[Occurrence]:
        if not keys:
            return []
        # per key, its first ``per_key`` in due order: read through the keyed index in due order,
        # stopping there, however many more wait
        firsts = [
            sa.select(t.c.id, t.c.occurrence, t.c.attempt, t.c.run_at)
            .where(sa.text(KEYED_PENDING_CONDITION), t.c.concurrency_key == key, t.c.run_at <= now)
            .order_by(t.c.run_at, t.c.id)
            .limit(per_key)
            .subquery()
            for key in keys
        ]
        statement = sa.union_all(*(sa.select(*first.c) for first in firsts))
        with translate_errors():
            rows = self._conn.execute(statement).all()
        return [
            Occurrence(job_id, occurrence, attempt, run_at) for job_id, occurrence, attempt, run_at in rows
        ]

    def record_fires(self, records: Sequence[FireRecord]) -> None:
        """The entries and the dashboard's per-minute summary of them (:mod:`.fire_minutes`)."""
        if records:
            with translate_errors():
                dialect = self._conn.dialect
                rows = [fire_params(f, dialect) for f in records]
                if dialect.name == "postgresql" and len(records) <= fire_minutes.PER_ENTRY_MAX:
                    fire_minutes.write_postgres(self._conn, _FIRE_FIELDS, rows, records)
                else:  # one COPY on PostgreSQL, else one executemany; then the summary
                    if not bulk.copy_rows(self._conn, fires.name, _FIRE_FIELDS, rows):
                        self._conn.exec_driver_sql(_insert_fires(str(dialect.paramstyle)), rows)
                    fire_minutes.add(self._conn, records)


_Step = Callable[[], None]


class _JoinedTransaction(_Transaction, JoinedTransaction):
    """Writes on the caller's connection, in the caller's transaction (see :mod:`.joined`)."""

    def __init__(
        self, conn: Connection, hook: Callable[[Callable[[], None], Callable[[], None]], None]
    ) -> None:
        super().__init__(conn)
        self._hook = hook

    def when_done(self, committed: Callable[[], None], rolled_back: Callable[[], None]) -> None:
        self._hook(committed, rolled_back)


_NOW = sa.bindparam("c_now", type_=UTCDateTime)


def _claiming(where: list[sa.ColumnElement[bool]]) -> sa.Update:
    """``UPDATE … SET status='active'`` claimed by ``c_worker`` until ``c_lease``, for rows matching
    ``where``, returning them (bind ``c_now``, ``c_worker``, ``c_lease``)."""
    return (
        sa.update(t)
        .where(*where)
        .values(
            status="active",
            claimed_by=sa.bindparam("c_worker"),
            claimed_until=sa.bindparam("c_lease", type_=UTCDateTime),
            updated_at=_NOW,
        )
        .returning(*t.c)
    )


#: Outcomes: a lost one leaves its fire claimed, to fire again (see ``outcome_transaction``).
_NO_FLUSH_WAIT = sa.text("SET LOCAL synchronous_commit = off")
# Status tests as literals, not bound parameters, so the planner can use the partial indexes
# (ix_schedule_jobs_pending_due, ix_schedule_jobs_active_claimed) rather than read every row.
_PENDING = t.c.status == sa.literal_column("'pending'")
_ACTIVE = t.c.status == sa.literal_column("'active'")
_FINISHED = sa.text(FINISHED_CONDITION)
_NOT_PENDING = sa.text(NOT_PENDING_CONDITION)
#: How long after rows with a concurrency key were last due a PostgreSQL claim keeps claiming them
#: with the rest in one round trip (rather than asking first whether any is due).
_KEYED_PIPELINE_SECONDS = 60.0
#: The PostgreSQL advisory lock key held by the transaction of each purge batch.
PURGE_LOCK_KEY = 0x5C4ED_9C6

#: The reconciler's scan: the key columns of open rows, in id order (the primary key's order).
_OPEN_OCCURRENCES = (
    sa.select(t.c.id, t.c.status, t.c.occurrence, t.c.attempt, t.c.run_at)
    .where(t.c.status.in_(["pending", "active"]))
    .order_by(t.c.id)
)

# SQLite's claims (PostgreSQL's are in pg_claims), built once. They run in a write transaction
# (BEGIN IMMEDIATE), so no other writer changes a row between choosing and updating it.
# Bind c_limit as well.
_UNKEYED = t.c.concurrency_key.is_(None)
_LIMIT = sa.bindparam("c_limit", type_=sa.Integer)
_CLAIM_DUE = _claiming(
    [
        t.c.id.in_(
            sa.select(t.c.id).where(_PENDING, t.c.run_at <= _NOW, _UNKEYED).order_by(t.c.run_at).limit(_LIMIT)
        ),
    ]
)

# Bind c_ids (the job ids) and c_keys ((id, occurrence, attempt) tuples): the id list lets SQLite
# look the rows up by primary key.
_CLAIM_MANY = _claiming(
    [
        t.c.id.in_(sa.bindparam("c_ids", expanding=True)),
        sa.tuple_(t.c.id, t.c.occurrence, t.c.attempt).in_(sa.bindparam("c_keys", expanding=True)),
        _PENDING,
        t.c.run_at <= _NOW,
        _UNKEYED,
    ]
)


def _keyed_claim(*, given: bool) -> sa.Update:
    """SQLite's claim of rows with a concurrency key (:mod:`schedule_sdk.domain.concurrency`): each
    waiting row in due order, while its key's active rows plus its place among the key's waiting
    rows stay within its limit. It runs in the claim's write transaction, which no other claim
    shares. Bind ``c_limit`` (``given``: ``c_ids`` and ``c_keys`` too, as ``_CLAIM_MANY``)."""
    j, a = t.alias("j"), t.alias("a")
    running = (
        sa.select(sa.func.count())
        .select_from(a)
        .where(
            a.c.status == sa.literal_column("'active'"),
            a.c.concurrency_key.is_not(None),
            a.c.concurrency_key == j.c.concurrency_key,
        )
        .scalar_subquery()
    )
    place = sa.func.row_number().over(partition_by=j.c.concurrency_key, order_by=(j.c.run_at, j.c.id))
    where = [
        j.c.status == sa.literal_column("'pending'"),
        j.c.concurrency_key.is_not(None),
        j.c.run_at <= _NOW,
    ]
    if given:
        where += [
            j.c.id.in_(sa.bindparam("c_ids", expanding=True)),
            sa.tuple_(j.c.id, j.c.occurrence, j.c.attempt).in_(sa.bindparam("c_keys", expanding=True)),
        ]
    columns = (
        j.c.id,
        j.c.run_at,
        j.c.concurrency_limit.label("lim"),
        place.label("place"),
        running.label("n"),
    )
    waiting = sa.select(*columns).where(*where).subquery()
    chosen = (
        sa.select(waiting.c.id)
        .where(waiting.c.n + waiting.c.place <= waiting.c.lim)
        .order_by(waiting.c.run_at, waiting.c.id)
        .limit(_LIMIT)
    )
    return _claiming([t.c.id.in_(chosen), _PENDING])


#: The earliest pending run_at; with ``n_now`` bound, leaving out keyed rows due by then (waiting).
_NEXT_DUE = sa.select(sa.func.min(t.c.run_at)).where(_PENDING)
_NEXT_DUE_UNWAITING = _NEXT_DUE.where(sa.or_(_UNKEYED, t.c.run_at > sa.bindparam("n_now", type_=UTCDateTime)))
_CLAIM_KEYED = _keyed_claim(given=False)
_CLAIM_KEYED_MANY = _keyed_claim(given=True)
#: The poller's claims on SQLite, compiled once (sqlite_claims).
_DRIVER_DUE = sqlite_claims.DriverClaim(_CLAIM_DUE)
_DRIVER_KEYED = sqlite_claims.DriverClaim(_CLAIM_KEYED)
#: SQLite: after a claim, when to claim next and whether rows with a key are left waiting.
_DRIVER_PLAN = sqlite_claims.DriverPlan(
    sa.select(
        _NEXT_DUE_UNWAITING.scalar_subquery(),
        sa.exists().where(
            sa.text(KEYED_PENDING_CONDITION), t.c.run_at <= sa.bindparam("n_now", type_=UTCDateTime)
        ),
    )
)


# Retention: the oldest finished rows, read through the partial index ix_schedule_jobs_finished
# (its condition repeated verbatim), never the open rows. Bind p_before and p_limit.
PURGE_CHOICE = (
    sa.select(t.c.id)
    .where(_FINISHED, t.c.updated_at < sa.bindparam("p_before", type_=UTCDateTime))
    .order_by(t.c.updated_at)
    .limit(sa.bindparam("p_limit", type_=sa.Integer))
)
_PURGE = sa.delete(t).where(t.c.id.in_(PURGE_CHOICE))
_PURGE_PG = sa.delete(t).where(t.c.id.in_(_once(PURGE_CHOICE.with_for_update(skip_locked=True))))


def list_statement(query: JobQuery) -> sa.Select[Any]:
    """The keyset page of ``list_jobs``: by id, through the primary key or a filter's
    ``(column, id)`` index (ix_schedule_jobs_owner, _tenant, _topic)."""
    statement = sa.select(t).order_by(t.c.id).limit(query.limit)
    for column, value in (
        ("owner_id", query.owner_id),
        ("tenant_id", query.tenant_id),
        ("topic", query.topic),
    ):
        if value is not None:
            statement = statement.where(t.c[column] == value)
    if query.statuses:
        statement = statement.where(t.c.status.in_(sorted(s.value for s in query.statuses)))
        if JobStatus.PENDING not in query.statuses:  # lets the planner use ix_schedule_jobs_status
            statement = statement.where(_NOT_PENDING)
    if query.after_id is not None:
        statement = statement.where(t.c.id > query.after_id)
    return statement


def _claims_engine(engine: Engine) -> Engine:
    """The claims' autocommit pool; its sessions do not wait for the WAL flush, unless a
    transaction pooler is in front: it forwards no session setting (claims then commit durably)."""
    name = application_name_of(engine)
    if transaction_pooled(engine):
        options = pooled_options("transaction", name)
    else:
        options = pooled_options("none", name)
        options["connect_args"] = {**options.get("connect_args", {}), "options": "-c synchronous_commit=off"}
    return sa.create_engine(
        engine.url,
        pool_size=2,
        max_overflow=4,
        pool_pre_ping=engine.pool._pre_ping,
        isolation_level="AUTOCOMMIT",
        **options,
    )


def _sorted(rows: Sequence[Mapping[Any, Any]]) -> list[ScheduledJob]:
    return sorted((from_row(r) for r in rows), key=lambda j: (j.run_at, j.id))


class SQLAlchemyJobStore(JobStore, JoinableStore, WorkerRegistry, FireHistory, Retention, SQLOperatorReads):
    """The job store on SQLite (file) or PostgreSQL, with every capability. Create the schema with
    :func:`schedule_sdk.adapters.stores.schema.upgrade` (the container does it at start-up)."""

    def __init__(
        self, engine: Engine, *, notify_channel: str = NOTIFY_CHANNEL, listen_url: str | None = None
    ) -> None:
        """``listen_url``: a direct PostgreSQL URL for :meth:`watch`'s ``LISTEN`` (default: the
        engine's own, unless the engine is behind a transaction pooler: then no ``LISTEN``)."""
        self.engine = engine
        self._channel = notify_channel
        self._listen_url = listen_url
        self._is_pg = engine.dialect.name == "postgresql"
        self._purge_engine: Engine | None = None  # SQLite: the purger's, which never checkpoints
        self._writer_conn: Connection | None = None  # SQLite: see _writer
        self._writer_pid = 0
        # SQLite has one writer at a time. Queue this process's writers on a lock, a prompt hand-off,
        # rather than in SQLite's busy handler, which sleeps 1, 2, 5, 10 ... 100 ms between tries
        # (measured: write-transaction start p99 105 ms -> 9 ms with 10 threads firing 200 jobs/s).
        self._writers: threading.RLock | None = None if self._is_pg else threading.RLock()
        # SQLite: the writer connection's commits never checkpoint; this thread does (see its module).
        self._checkpoints = None if self._is_pg else Checkpointer(self._checkpoint_wal)
        self._checkpoint_conn: tuple[sqlite3.Connection | None, int] = (None, 0)
        self._write_lock: contextlib.AbstractContextManager[object] = (
            self._writers or contextlib.nullcontext()
        )
        # PostgreSQL: claims are single statements, so they run in autocommit (one round trip, not
        # BEGIN/SET/UPDATE/COMMIT) on a small pool whose sessions do not wait for the WAL flush. A
        # claim need not survive a database crash: a lost claim leaves the row pending, so the
        # occurrence fires again (at least once). Outcomes commit the same way, on the main pool
        # (``outcome_transaction``); every other write waits for the flush.
        self._claims = _claims_engine(engine) if self._is_pg else None
        #: Until when a claim takes rows with a concurrency key first (monotonic clock).
        self._keyed_until = 0.0

    @property
    def one_writer(self) -> bool:
        """SQLite: one write transaction at a time."""
        return not self._is_pg

    @contextlib.contextmanager
    def transaction(self) -> Iterator[JobTransaction]:
        with self._write() as conn:
            yield _Transaction(conn)

    @contextlib.contextmanager
    def outcome_transaction(self) -> Iterator[JobTransaction]:
        """On PostgreSQL its commit does not wait for the WAL flush (``SET LOCAL``: this
        transaction only, so it also holds behind a transaction pooler)."""
        with self._write() as conn:
            if self._is_pg:
                conn.execute(_NO_FLUSH_WAIT)
            yield _Transaction(conn)

    @contextlib.contextmanager
    def join(self, connection: object) -> Iterator[JoinedTransaction]:
        """Write through the caller's SQLAlchemy ``Connection`` or ``Session``, or Django's
        connection inside ``transaction.atomic()`` (on this store's database), in its transaction:
        this store's write lock is not taken, the caller commits or rolls back."""
        if django.is_django_connection(connection):
            joined.check_database(django.url_of(connection), self.engine.url)
            with translate_errors(), django.borrow(connection) as conn:
                yield _JoinedTransaction(conn, lambda done, _: django.on_commit(connection, done))
            return
        with translate_errors():
            conn = joined.connection_of(connection, self.engine.url)
        yield _JoinedTransaction(
            conn, lambda done, undone: joined.after_transaction(connection, done, undone)
        )

    @contextlib.contextmanager
    def lock_writes(self, *, wait: bool = True) -> Iterator[bool]:
        """Hold this process's writer lock (SQLite; nothing to hold on PostgreSQL) for the block;
        yields whether it is held (without ``wait``, False when another thread has it)."""
        if self._writers is None:
            yield True
            return
        taken = self._writers.acquire(blocking=wait)
        try:
            yield taken
        finally:
            if taken:
                self._writers.release()

    @contextlib.contextmanager
    def _write(self, engine: Engine | None = None) -> Iterator[Connection]:
        if self._writers is None or engine is not None:
            with self._write_lock, translate_errors(), (engine or self.engine).connect() as conn:
                conn.execution_options(**{WRITE: True})
                with conn.begin():
                    yield conn
            return
        with self._writers, translate_errors():
            conn = self._writer()
            try:
                with conn.begin():
                    yield conn
            except BaseException:
                if conn.invalidated or conn.in_transaction():
                    self._drop_writer()
                raise
            if self._checkpoints is not None:
                self._checkpoints.committed()

    def _writer(self) -> Connection:
        """SQLite: the one connection of this process's writers, kept open (they take turns on the
        writer lock anyway; a pool checkout and a new ``Connection`` per write were about a tenth
        of ``schedule_at``). A forked child opens its own."""
        if self._writer_conn is None or self._writer_pid != os.getpid():
            conn = self.engine.connect()
            conn.execution_options(**{WRITE: True})
            # Its commits never run a checkpoint (an fsync under the writer lock): the
            # checkpointer's thread does (checkpoints module).
            driver = conn.connection.driver_connection
            assert driver is not None
            driver.execute("PRAGMA wal_autocheckpoint=0")
            self._writer_conn, self._writer_pid = conn, os.getpid()
        return self._writer_conn

    def _checkpoint_wal(self) -> None:
        """A ``PASSIVE`` WAL checkpoint (it waits for no writer), on the checkpointer thread's own
        connection (not the pool's: it takes no connection an operation could be waiting for)."""
        conn, pid = self._checkpoint_conn
        if conn is None or pid != os.getpid():
            path = self.engine.url.database or ""
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._checkpoint_conn = (conn, os.getpid())
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _others_version(self) -> int | None:
        """SQLite: ``data_version`` on this process's writer connection, which only other
        connections' commits change; None while a writer holds it longer than a moment (or
        before the first write). A moment: the watcher hears a commit before its writer lets go."""
        assert self._writers is not None
        if not self._writers.acquire(timeout=0.05):
            return None
        try:
            conn = self._writer_conn
            if conn is None or self._writer_pid != os.getpid() or conn.in_transaction():
                return None
            driver = conn.connection.driver_connection
            assert isinstance(driver, sqlite3.Connection)
            return int(driver.execute("PRAGMA data_version").fetchone()[0])
        except (sqlite3.Error, exc.SQLAlchemyError):
            return None
        finally:
            self._writers.release()

    def _drop_writer(self) -> None:
        conn, self._writer_conn = self._writer_conn, None
        if conn is not None and self._writer_pid == os.getpid():
            with contextlib.suppress(exc.SQLAlchemyError):
                conn.close()

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        with translate_errors(), self.engine.connect() as conn, conn.begin():
            yield conn

    @contextlib.contextmanager
    def _claiming(self) -> Iterator[Connection]:
        """A connection for one claim statement (autocommit on PostgreSQL; a write on SQLite)."""
        if self._claims is None:
            with self._write() as conn:
                yield conn
            return
        with translate_errors(), self._claims.connect() as conn:
            yield conn

    def get(self, job_id: str) -> ScheduledJob | None:
        with self._read() as conn:
            row = conn.execute(sa.select(t).where(t.c.id == job_id)).mappings().first()
        return None if row is None else from_row(row)

    def list_jobs(self, query: JobQuery) -> list[ScheduledJob]:
        with self._read() as conn:
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
        if self._claims is not None:
            params = {"now": now, "worker": worker_id, "lease": lease_until, "limit": limit}
            rows: list[dict[str, Any]] = []
            if time.monotonic() >= self._keyed_until:  # no keyed row lately: the plain claim
                rows, waiting, next_due = pg_claims.claim_due(self._claims, params)
                if not waiting or len(rows) >= limit:
                    return DueClaim(_sorted(rows), None if len(rows) >= limit else next_due, waiting)
                params["limit"] = limit - len(rows)
            # rows with a key are due: both claims in one transaction, one round trip
            more, waiting, next_due = pg_claims.claim_keyed_first(self._claims, params)
            if waiting or any(row["concurrency_key"] is not None for row in more):
                self._keyed_until = time.monotonic() + _KEYED_PIPELINE_SECONDS  # so for a while
            rows += more
            return DueClaim(_sorted(rows), None if len(rows) >= limit else next_due, waiting)
        params = {"c_now": now, "c_worker": worker_id, "c_lease": lease_until, "c_limit": limit}
        with self._claiming() as conn:  # SQLite: as _claim, through the compiled driver statements
            rows = _DRIVER_DUE.run(conn, params)
            if len(rows) < limit:
                params["c_limit"] = limit - len(rows)
                rows += _DRIVER_KEYED.run(conn, params)
            if len(rows) >= limit or not planned:
                return DueClaim(_sorted(rows), None)
            next_due, waiting = _DRIVER_PLAN.plan(conn, {"n_now": now})
        return DueClaim(_sorted(rows), next_due, waiting)

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
        if self._claims is not None:
            ids, numbers, attempts = (list(column) for column in zip(*keys, strict=True))
            params = {"now": now, "worker": worker_id, "lease": lease_until}
            params.update(ids=ids, occurrences=numbers, attempts=attempts)
            rows = pg_claims.claim(self._claims, pg_claims.CLAIM_MANY, params)
            if len(rows) < len(keys):  # some may have a concurrency key
                params["limit"] = len(keys) - len(rows)
                rows += pg_claims.claim_keyed(
                    self._claims, pg_claims.LOCK_KEYS_OF_HANDED, pg_claims.CLAIM_KEYED_MANY, params
                )
            return _sorted(rows)
        params = {"c_ids": [key[0] for key in keys], "c_keys": keys}
        return self._claim(_CLAIM_MANY, _CLAIM_KEYED_MANY, len(keys), now, worker_id, lease_until, **params)

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
        with self._claiming() as conn:
            rows = list(conn.execute(statement, params).mappings().all())
            if len(rows) < limit:
                params["c_limit"] = limit - len(rows)
                rows += conn.execute(keyed, params).mappings().all()
        return _sorted(rows)

    def extend_claims(self, worker_id: str, job_ids: Sequence[str], lease_until: datetime) -> None:
        if not job_ids:
            return
        if self._is_pg:  # one array parameter: a worker holding 2,000 fires binds 2,000 ids
            with self._write() as conn:
                until = _FIRE_TIME.process_bind_param(lease_until, conn.dialect)
                conn.exec_driver_sql(_EXTEND_PG, (worker_id, list(job_ids), until))
            return
        statement = (
            sa.update(t)
            .where(t.c.claimed_by == worker_id, t.c.status == "active", t.c.id.in_(list(job_ids)))
            .values(claimed_until=lease_until)
        )
        with self._write() as conn:
            conn.execute(statement)

    def release_claims(self, worker_id: str, job_ids: Sequence[str]) -> int:
        if not job_ids:
            return 0
        statement = (
            sa.update(t)
            .where(t.c.claimed_by == worker_id, t.c.status == "active", t.c.id.in_(list(job_ids)))
            .values(status="pending", claimed_by=None, claimed_until=None)
        )
        with self._write() as conn:
            return int(conn.execute(statement).rowcount)

    def release_expired(self, now: datetime, limit: int) -> list[ScheduledJob]:
        expired = (
            sa.select(t.c.id)
            .where(_ACTIVE, t.c.claimed_until < now)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        statement = (
            sa.update(t)
            .where(t.c.id.in_(_once(expired)), _ACTIVE, t.c.claimed_until < now)
            .values(status="pending", claimed_by=None, claimed_until=None, updated_at=now)
            .returning(*t.c)
        )
        with self._write() as conn:
            rows = conn.execute(statement).mappings().all()
        return [from_row(r) for r in rows]

    # -- WorkerRegistry ------------------------------------------------------------------------

    def beat(self, worker: WorkerInfo) -> None:
        values = dataclasses.asdict(worker)
        with self._write() as conn:
            updated = conn.execute(
                sa.update(w)
                .where(w.c.id == worker.id)
                .values(
                    last_beat=worker.last_beat,
                    in_flight=worker.in_flight,
                    stuck=worker.stuck,
                    clock_offset=worker.clock_offset,
                    clock_error=worker.clock_error,
                )
            ).rowcount
            if not updated:
                conn.execute(sa.insert(w), values)

    def warm(self) -> None:
        """PostgreSQL: open a session of the claims' pool (its connection and start-up, about
        5 ms, would otherwise fall on the first claim, and with it on the first fire)."""
        if self._claims is None:
            return
        with translate_errors(), self._claims.connect() as conn:
            conn.exec_driver_sql("SELECT 1")

    def store_clock(self) -> datetime | None:
        """PostgreSQL's ``clock_timestamp()``, one autocommit round trip; None on SQLite, which
        has no clock of its own (its time is the clock of the machine its processes share).
        Read on the durable pool, in autocommit: its sessions take no start-up option, so a worker
        misconfigured behind a transaction pooler still reaches the check that names the problem."""
        if not self._is_pg:
            return None
        with translate_errors(), self.engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            value = conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one()
        assert isinstance(value, datetime)
        return value.astimezone(UTC)

    def workers(self) -> list[WorkerInfo]:
        with self._read() as conn:
            rows = conn.execute(sa.select(w).order_by(w.c.id)).mappings().all()
        return [WorkerInfo(**dict(row)) for row in rows]

    def remove_worker(self, worker_id: str) -> None:
        with self._write() as conn:
            conn.execute(sa.delete(w).where(w.c.id == worker_id))

    def release_dead(
        self, beat_before: datetime, also: Sequence[str], now: datetime, limit: int
    ) -> list[ScheduledJob]:
        dead = sa.select(w.c.id).where(sa.or_(w.c.last_beat < beat_before, w.c.id.in_(list(also))))
        chosen = (
            sa.select(t.c.id)
            .where(_ACTIVE, t.c.claimed_by.in_(dead))
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        statement = (
            sa.update(t)
            .where(t.c.id.in_(_once(chosen)), _ACTIVE)
            .values(status="pending", claimed_by=None, claimed_until=None, updated_at=now)
            .returning(*t.c)
        )
        with self._write() as conn:
            if self._is_pg:  # their sessions left inside a transaction would hide locked claims
                sessions.end_sessions_of(conn, conn.execute(dead).scalars().all())
            rows = conn.execute(statement).mappings().all()
        return [from_row(r) for r in rows]

    def forget_workers(self, beat_before: datetime) -> int:
        with self._write() as conn:
            return int(conn.execute(sa.delete(w).where(w.c.last_beat < beat_before)).rowcount)

    def backlog(self, now: datetime) -> list[TopicBacklog]:
        is_due = t.c.run_at <= sa.bindparam("now", now, type_=UTCDateTime)
        statement = (
            sa.select(
                t.c.topic,
                sa.func.count(),
                sa.func.coalesce(sa.func.sum(sa.case((is_due, 1), else_=0)), 0),
                sa.type_coerce(sa.func.min(sa.case((is_due, t.c.run_at))), UTCDateTime),
            )
            .where(_PENDING)
            .group_by(t.c.topic)
            .order_by(t.c.topic)
        )
        with self._read() as conn:
            rows = conn.execute(statement).all()
        return [TopicBacklog(topic, int(n), int(due), oldest) for topic, n, due, oldest in rows]

    def next_due_at(self, now: datetime | None = None) -> datetime | None:
        statement, params = (_NEXT_DUE, {}) if now is None else (_NEXT_DUE_UNWAITING, {"n_now": now})
        with self._claiming() if self._claims is not None else self._read() as conn:
            value = conn.execute(statement, params).scalar()
        return value if isinstance(value, datetime) or value is None else None

    def concurrency_load(self, now: datetime) -> list[KeyLoad]:
        """One query over the keyed partial indexes."""
        is_active = t.c.status == sa.literal_column("'active'")
        is_waiting = sa.and_(_PENDING, t.c.run_at <= sa.bindparam("now", now, type_=UTCDateTime))
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
        with self._read() as conn:
            rows = conn.execute(statement).all()
        return [
            KeyLoad(key, int(limit), int(running), int(waiting), oldest)
            for key, limit, running, waiting, oldest in rows
        ]

    def scan_open(self, after_id: str | None, limit: int) -> list[ScheduledJob]:
        statement = sa.select(t).where(t.c.status.in_(["pending", "active"])).order_by(t.c.id).limit(limit)
        if after_id is not None:
            statement = statement.where(t.c.id > after_id)
        with self._read() as conn:
            return [from_row(r) for r in conn.execute(statement).mappings()]

    def scan_open_occurrences(self, after_id: str | None, limit: int) -> list[OpenOccurrence]:
        statement = _OPEN_OCCURRENCES.limit(limit)
        if after_id is not None:
            statement = statement.where(t.c.id > after_id)
        with self._read() as conn:
            rows = conn.execute(statement).all()
        return [
            OpenOccurrence(Occurrence(job_id, occurrence, attempt, run_at), status == "pending")
            for job_id, status, occurrence, attempt, run_at in rows
        ]

    def purge_finished(self, before: datetime, limit: int, *, wait: bool = False) -> int | None:
        if not self._is_pg:
            return self._purge_sqlite(before, limit)
        with self._write() as conn:
            # One purger at a time: a transaction-scoped advisory lock.
            lock = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
            taken = conn.execute(sa.text(f"SELECT {lock}(:key)"), {"key": PURGE_LOCK_KEY}).scalar()
            if not wait and not taken:
                return None
            return int(conn.execute(_PURGE_PG, {"p_before": before, "p_limit": limit}).rowcount)

    def _purge_sqlite(self, before: datetime, limit: int) -> int:
        """One batch on SQLite: the write transaction (BEGIN IMMEDIATE) excludes every other writer,
        purgers included. A batch dirties many pages, so a commit on a connection with the usual
        ``wal_autocheckpoint`` often runs a checkpoint (copy and fsync, several ms) while this
        process's writer lock is still held, and a claim waits for it. The purge connection never
        checkpoints by itself: it checkpoints (PASSIVE, which waits for no writer or reader) after
        releasing the lock."""
        if self._purge_engine is None:
            url = self.engine.url.render_as_string(hide_password=False)
            self._purge_engine = make_engine(url, pool_size=1, wal_autocheckpoint=0)
        with self._write(self._purge_engine) as conn:
            deleted = int(conn.execute(_PURGE, {"p_before": before, "p_limit": limit}).rowcount)
        if deleted:
            with translate_errors():
                raw = self._purge_engine.raw_connection()
                try:
                    raw.cursor().execute("PRAGMA wal_checkpoint(PASSIVE)")
                finally:
                    raw.close()
        return deleted

    # -- FireHistory ---------------------------------------------------------------------------

    def record_fires(self, tx: JobTransaction, fires: Sequence[FireRecord]) -> None:
        if not isinstance(tx, _Transaction):
            raise TypeError("SQLAlchemyJobStore.record_fires needs a transaction of a SQLAlchemyJobStore")
        tx.record_fires(fires)

    def history(self, job_id: str, limit: int, before: datetime | None = None) -> list[FireRecord]:
        statement = (
            sa.select(fires)
            .where(fires.c.job_id == job_id)
            .order_by(fires.c.fired_at.desc(), fires.c.id.desc())
            .limit(limit)
        )
        if before is not None:
            statement = statement.where(fires.c.fired_at < before)
        with self._read() as conn:
            return [fire_from_row(r) for r in conn.execute(statement).mappings()]

    def purge_history(self, before: datetime, limit: int) -> int:
        """Entries first; once they are all gone, the per-minute summary's rows of whole minutes
        before ``before`` (at most ``limit`` rows in all per call)."""
        old = fires.c.fired_at < before
        chosen = sa.select(fires.c.id).where(old).order_by(fires.c.fired_at).limit(limit)
        if self._is_pg:  # rows another purge is deleting are left to it
            chosen = _once(chosen.with_for_update(skip_locked=True))
        with self._write() as conn:
            deleted = int(conn.execute(sa.delete(fires).where(fires.c.id.in_(chosen))).rowcount)
            if deleted < limit:
                deleted += fire_minutes.purge(conn, before, limit - deleted, skip_locked=self._is_pg)
            return deleted

    # -----------------------------------------------------------------------------------------

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
        if not self._is_pg:
            return watch.poll_sqlite_data_version(self.engine.url, on_change, others=self._others_version)
        if self._listen_url is not None:
            url = sa.make_url(self._listen_url)
        elif transaction_pooled(self.engine):
            return lambda: None  # wake-ups by polling: LISTEN cannot work through the pooler
        else:
            url = self.engine.url
        watch.check_listen(url)
        return watch.listen_postgres(url, self._channel, on_change, on_slot_freed)

    def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.close()
            conn, pid = self._checkpoint_conn
            if conn is not None and pid == os.getpid():
                conn.close()
        if self._writers is not None:
            with self._writers:
                self._drop_writer()
        if self._claims is not None:
            self._claims.dispose()
        if self._purge_engine is not None:
            self._purge_engine.dispose()
        self.engine.dispose()


class ConnectionJobStore(SQLAlchemyJobStore):
    """The store's reads and writes, on one given connection (the asyncio service runs the sync
    code in SQLAlchemy's greenlet bridge over an ``AsyncConnection``: the same statements, async
    I/O). Only what :class:`~schedule_sdk.core.service.ScheduleService` calls is meant to be used."""

    def __init__(self, conn: Connection, home: Engine) -> None:  # no super().__init__: no engines of its own
        self.engine = home  # the SDK's database (a caller's connection= must reach it)
        self._conn = conn
        self._channel = NOTIFY_CHANNEL
        self._listen_url = None
        self._is_pg = conn.dialect.name == "postgresql"
        self._writers = None
        self._write_lock = contextlib.nullcontext()  # a thread lock would block the event loop
        self._purge_engine = None
        self._claims = None

    @contextlib.contextmanager
    def _write(self, engine: Engine | None = None) -> Iterator[Connection]:
        with translate_errors():
            self._conn.execution_options(**{WRITE: True})
            with self._conn.begin():
                yield self._conn

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        with translate_errors():
            self._conn.execution_options(**{WRITE: False})  # a long-lived connection keeps options
            with self._conn.begin():
                yield self._conn

    def close(self) -> None:
        return None  # the connection and the engine belong to the caller
