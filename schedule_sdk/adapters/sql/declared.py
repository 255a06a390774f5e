"""``SQLAlchemyDeclaredRows``: the ``schedule_declared`` table on SQLite or PostgreSQL.

A sync runs in one job store transaction: on PostgreSQL it first takes a transaction-scoped
advisory lock; on SQLite the transaction is already the one writer (``BEGIN IMMEDIATE``). So two
processes syncing at once take turns, and the second sees what the first committed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from schedule_sdk.adapters.sql.engine import translate_errors
from schedule_sdk.adapters.sql.rows import from_row
from schedule_sdk.adapters.sql.tables import dialect_insert
from schedule_sdk.adapters.sql.tables import schedule_declared as d
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.adapters.sql.timers import connection_of
from schedule_sdk.domain.declared import StoredDeclaration
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import DeclaredRows, JobTransaction

#: The key of the sync's advisory lock on PostgreSQL (arbitrary, distinct from the migrations').
SYNC_LOCK_KEY = 0x5C4ED_DEC1

_ROWS = sa.select(d, t).select_from(d.outerjoin(t, t.c.id == d.c.job_id)).order_by(d.c.name)


def _declaration(row: Mapping[Any, Any]) -> StoredDeclaration:
    return StoredDeclaration(
        name=row["name"],
        job_id=row["job_id"],
        kind=row["kind"],
        fingerprint=row["fingerprint"],
        spec=row["spec"],
        version=row["version"],
        declared=bool(row["declared"]),
        synced_at=row["synced_at"],
    )


def _pairs(conn: Connection) -> list[tuple[StoredDeclaration, ScheduledJob | None]]:
    with translate_errors():
        rows = conn.execute(_ROWS).mappings().all()
    return [(_declaration(r), None if r["id"] is None else from_row(r)) for r in rows]


class SQLAlchemyDeclaredRows(DeclaredRows):
    """:class:`~schedule_sdk.ports.DeclaredRows` as the ``schedule_declared`` table on ``engine``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def lock(self, tx: JobTransaction) -> None:
        conn = connection_of(tx)
        if conn.dialect.name == "postgresql":
            with translate_errors():
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SYNC_LOCK_KEY})

    def rows(self, tx: JobTransaction) -> list[tuple[StoredDeclaration, ScheduledJob | None]]:
        return _pairs(connection_of(tx))

    def put(self, tx: JobTransaction, rows: Sequence[StoredDeclaration]) -> None:
        if not rows:
            return
        conn = connection_of(tx)
        params = [
            {
                "name": r.name,
                "job_id": r.job_id,
                "kind": r.kind,
                "fingerprint": r.fingerprint,
                "spec": r.spec,
                "version": r.version,
                "declared": r.declared,
                "synced_at": r.synced_at,
            }
            for r in rows
        ]
        insert = dialect_insert(conn.dialect.name)(d)
        statement = insert.on_conflict_do_update(
            index_elements=[d.c.name],
            set_={c.name: insert.excluded[c.name] for c in d.c if c.name != "name"},
        )
        with translate_errors():
            conn.execute(statement, params)

    def read(self) -> list[tuple[StoredDeclaration, ScheduledJob | None]]:
        with translate_errors(), self.engine.connect() as conn, conn.begin():
            return _pairs(conn)
