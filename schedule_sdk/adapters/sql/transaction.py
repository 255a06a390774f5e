"""The SQL job store's write transaction (:class:`SQLTransaction`) and its form inside a caller's
own transaction (:class:`JoinedSQLTransaction`): the writes of the write order, on one connection."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from schedule_sdk.adapters.sql import fire_minutes
from schedule_sdk.adapters.sql.engine import translate_errors
from schedule_sdk.adapters.sql.fast import bulk
from schedule_sdk.adapters.sql.fast.writes import fire_params, insert_fires, update_sql, update_values
from schedule_sdk.adapters.sql.rows import FIRE_FIELDS, from_row, to_row, update_params
from schedule_sdk.adapters.sql.statements import update_statement
from schedule_sdk.adapters.sql.tables import KEYED_PENDING_CONDITION
from schedule_sdk.adapters.sql.tables import schedule_fires as fires
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.domain.errors import ClientRequestIdInUse
from schedule_sdk.domain.history import FireRecord
from schedule_sdk.domain.jobs import ScheduledJob, repeated_request_id
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import Guard, JobTransaction, JoinedTransaction, Occurrence


class SQLTransaction(JobTransaction):
    """A write transaction of the SQL job store, on its connection."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    @property
    def connection(self) -> Connection:
        """The transaction's connection, for modules that keep their own tables in the same
        database and must write them atomically with job rows (the timer)."""
        return self._conn

    def insert(self, job: ScheduledJob) -> None:
        # On PostgreSQL a trigger (migration 0001) notifies the store's channel on commit.
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
            statement = update_statement(guard.statuses, guard.claimed_by is not None)
            result = self._conn.execute(statement, update_params(job, guard))
        return result.rowcount == 1

    def update_many(self, changes: Sequence[tuple[ScheduledJob, Guard]]) -> None:
        # One executemany per statement shape (the guard's statuses and whether it checks a claim).
        batches: dict[tuple[frozenset[JobStatus], bool], list[tuple[Any, ...]]] = {}
        dialect = self._conn.dialect
        for job, guard in changes:
            key = (guard.statuses, guard.claimed_by is not None)
            batches.setdefault(key, []).append(update_values(job, guard, dialect))
        with translate_errors():
            for (statuses, checks_claim), params in batches.items():
                sql = update_sql(statuses, checks_claim, str(dialect.paramstyle))
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
                    fire_minutes.write_postgres(self._conn, FIRE_FIELDS, rows, records)
                else:  # one COPY on PostgreSQL, else one executemany; then the summary
                    if not bulk.copy_rows(self._conn, fires.name, FIRE_FIELDS, rows):
                        self._conn.exec_driver_sql(insert_fires(str(dialect.paramstyle)), rows)
                    fire_minutes.add(self._conn, records)


class JoinedSQLTransaction(SQLTransaction, JoinedTransaction):
    """Writes on the caller's connection, in the caller's transaction (see :mod:`.joined`)."""

    def __init__(
        self, conn: Connection, hook: Callable[[Callable[[], None], Callable[[], None]], None]
    ) -> None:
        super().__init__(conn)
        self._hook = hook

    def when_done(self, committed: Callable[[], None], rolled_back: Callable[[], None]) -> None:
        self._hook(committed, rolled_back)
