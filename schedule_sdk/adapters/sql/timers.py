"""``SQLAlchemyTimerStore``: ``timer_schedules`` on SQLite or PostgreSQL.

Timestamps are ISO 8601 UTC text with milliseconds (``2026-11-21T10:00:00.000Z``, the wire
format, so text order is time order) on SQLite and ``timestamptz`` on PostgreSQL. "Now" is always
bound from the process clock. Writes run on the job store transaction's own connection, so a timer
row and the job that fires it commit (or roll back) together. Every statement that serves a tenant
filters by ``tenant_id``; the only cross-tenant query is the maintenance query :meth:`unarmed`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection, Engine

from schedule_sdk.adapters.sql.engine import translate_errors
from schedule_sdk.adapters.sql.tables import UTCDateTime, dialect_insert
from schedule_sdk.adapters.sql.tables import schedule_jobs as jobs
from schedule_sdk.domain.errors import InvalidTimerCommand
from schedule_sdk.domain.timers import TimerEntry, TimerState
from schedule_sdk.ports import JobTransaction, TimerStore

#: ``YYYY-MM-DDTHH:MM:SS.sssZ`` text on SQLite (the wire format), timestamptz on PostgreSQL.
TimerTimestamp = UTCDateTime(milliseconds=True)


metadata = sa.MetaData()

#: Statements only; the DDL (STRICT, CHECK, the optional foreign key) is migration 0002's.
timer_schedules = sa.Table(
    "timer_schedules",
    metadata,
    sa.Column("tenant_id", sa.Text, primary_key=True),
    sa.Column("service_call_id", sa.Text, primary_key=True),
    sa.Column("correlation_id", sa.Text, nullable=False),
    sa.Column("due_at", TimerTimestamp, nullable=False),
    sa.Column("registered_at", TimerTimestamp, nullable=False),
    sa.Column("reached_at", TimerTimestamp, nullable=True),
    sa.Column("state", sa.Text, nullable=False),
)
t = timer_schedules
_SCHEDULED = TimerState.SCHEDULED.value


def entry_from_row(row: Mapping[Any, Any]) -> TimerEntry:
    return TimerEntry(
        tenant_id=row["tenant_id"],
        service_call_id=row["service_call_id"],
        correlation_id=row["correlation_id"],
        due_at=row["due_at"],
        registered_at=row["registered_at"],
        reached_at=row["reached_at"],
        state=TimerState(row["state"]),
    )


def _key(tenant_id: str, service_call_id: str) -> list[sa.ColumnElement[bool]]:
    return [t.c.tenant_id == tenant_id, t.c.service_call_id == service_call_id]


def connection_of(tx: JobTransaction) -> Connection:
    """The SQLAlchemy connection of a job store transaction."""
    conn = getattr(tx, "connection", None)
    if not isinstance(conn, Connection):
        raise TypeError("the timer needs the SQLAlchemy job store (its transactions expose .connection)")
    return conn


def due_query(tenant_id: str, now: datetime, limit: int) -> sa.Select[Any]:
    """Seed 003's per-tenant polling query (served by ``idx_timer_schedules_due_at``)."""
    return (
        sa.select(t)
        .where(t.c.tenant_id == tenant_id, t.c.state == _SCHEDULED, t.c.due_at <= now)
        .order_by(t.c.due_at)
        .limit(limit)
    )


class SQLAlchemyTimerStore(TimerStore):
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        insert = dialect_insert(engine.dialect.name)
        # RETURNING tells which rows were new (executemany: "insertmanyvalues" batches)
        self._insert_statement = (
            insert(t)
            .on_conflict_do_nothing(index_elements=[t.c.tenant_id, t.c.service_call_id])
            .returning(t.c.tenant_id, t.c.service_call_id)
        )

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        with translate_errors(), self.engine.connect() as conn, conn.begin():
            yield conn

    def _rows(self, statement: sa.Select[Any]) -> list[TimerEntry]:
        with self._read() as conn:
            return [entry_from_row(r) for r in conn.execute(statement).mappings()]

    def get(
        self, tenant_id: str, service_call_id: str, tx: JobTransaction | None = None
    ) -> TimerEntry | None:
        statement = sa.select(t).where(*_key(tenant_id, service_call_id))
        if tx is None:
            rows = self._rows(statement)
        else:
            with translate_errors():
                rows = [
                    entry_from_row(r)
                    for r in connection_of(tx).execute(statement.with_for_update()).mappings()
                ]
        return rows[0] if rows else None

    def get_many(
        self, tx: JobTransaction, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], TimerEntry]:
        if not keys:
            return {}
        # each key carries its tenant: the statement never reaches a timer of another tenant
        statement = sa.select(t).where(sa.tuple_(t.c.tenant_id, t.c.service_call_id).in_(list(keys)))
        with translate_errors():
            rows = connection_of(tx).execute(statement.with_for_update()).mappings()
            return {(r["tenant_id"], r["service_call_id"]): entry_from_row(r) for r in rows}

    def insert_many(self, tx: JobTransaction, entries: Sequence[TimerEntry]) -> set[tuple[str, str]]:
        if not entries:
            return set()
        rows = [
            {
                "tenant_id": e.tenant_id,
                "service_call_id": e.service_call_id,
                "correlation_id": e.correlation_id,
                "due_at": e.due_at,
                "registered_at": e.registered_at,
                "reached_at": e.reached_at,
                "state": e.state.value,
            }
            for e in entries
        ]
        with translate_errors():
            try:
                result = connection_of(tx).execute(self._insert_statement, rows)
            except exc.IntegrityError as error:  # the only constraint left: the service_calls FK
                what = (
                    f"({entries[0].tenant_id!r}, {entries[0].service_call_id!r})"
                    if len(entries) == 1
                    else f"of one of {len(entries)} timers"
                )
                raise InvalidTimerCommand(f"no service call {what} in service_calls") from error
            return {(r.tenant_id, r.service_call_id) for r in result}

    def move(self, tx: JobTransaction, tenant_id: str, service_call_id: str, due_at: datetime) -> bool:
        statement = (
            sa.update(t)
            .where(*_key(tenant_id, service_call_id), t.c.state == _SCHEDULED)
            .values(due_at=due_at)
        )
        with translate_errors():
            return connection_of(tx).execute(statement).rowcount == 1

    def mark_reached(self, tx: JobTransaction, entry: TimerEntry, reached_at: datetime) -> bool:
        statement = (
            sa.update(t)
            .where(
                *_key(entry.tenant_id, entry.service_call_id),
                t.c.state == _SCHEDULED,
                t.c.due_at == entry.due_at,
            )
            .values(state=TimerState.REACHED.value, reached_at=reached_at)
        )
        with translate_errors():
            return connection_of(tx).execute(statement).rowcount == 1

    def find_due(self, tenant_id: str, now: datetime, limit: int = 100) -> list[TimerEntry]:
        return self._rows(due_query(tenant_id, now, limit))

    def by_correlation(self, tenant_id: str, correlation_id: str) -> list[TimerEntry]:
        statement = (
            sa.select(t)
            .where(t.c.tenant_id == tenant_id, t.c.correlation_id == correlation_id)
            .order_by(t.c.due_at, t.c.service_call_id)
        )
        return self._rows(statement)

    def unarmed(self, topic: str, limit: int) -> list[TimerEntry]:
        armed = sa.exists().where(
            jobs.c.owner_id == t.c.service_call_id,
            jobs.c.tenant_id == t.c.tenant_id,
            jobs.c.topic == topic,
            jobs.c.status.in_(["pending", "active"]),
        )
        statement = sa.select(t).where(t.c.state == _SCHEDULED, ~armed).order_by(t.c.due_at).limit(limit)
        return self._rows(statement)
