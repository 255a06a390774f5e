"""The SQL job store's fire history (``schedule_fires`` and its per-minute summary)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa

from schedule_sdk.adapters.sql import fire_minutes
from schedule_sdk.adapters.sql.connections import Connections
from schedule_sdk.adapters.sql.rows import fire_from_row
from schedule_sdk.adapters.sql.statements import once
from schedule_sdk.adapters.sql.tables import schedule_fires as fires
from schedule_sdk.adapters.sql.transaction import SQLTransaction
from schedule_sdk.domain.history import FireRecord
from schedule_sdk.ports import FireHistory, JobTransaction


class SQLFireHistory(FireHistory):
    """:class:`~schedule_sdk.ports.FireHistory` on the SQL job store's connections."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections

    def record_fires(self, tx: JobTransaction, fires: Sequence[FireRecord]) -> None:
        if not isinstance(tx, SQLTransaction):
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
        with self.connections.read() as conn:
            return [fire_from_row(r) for r in conn.execute(statement).mappings()]

    def purge_history(self, before: datetime, limit: int) -> int:
        """Entries first; once they are all gone, the per-minute summary's rows of whole minutes
        before ``before`` (at most ``limit`` rows in all per call)."""
        old = fires.c.fired_at < before
        chosen = sa.select(fires.c.id).where(old).order_by(fires.c.fired_at).limit(limit)
        if self.connections.is_pg:  # rows another purge is deleting are left to it
            chosen = once(chosen.with_for_update(skip_locked=True))
        with self.connections.write() as conn:
            deleted = int(conn.execute(sa.delete(fires).where(fires.c.id.in_(chosen))).rowcount)
            if deleted < limit:
                deleted += fire_minutes.purge(
                    conn, before, limit - deleted, skip_locked=self.connections.is_pg
                )
            return deleted
