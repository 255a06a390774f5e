"""``SQLDueScan``: the pending rows about to fire, by due time (the :class:`~schedule_sdk.ports.DueScan`
capability), through the partial index of pending rows by ``run_at`` (``ix_schedule_jobs_pending_due``)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from schedule_sdk.adapters.sql.connections import Connections
from schedule_sdk.adapters.sql.statements import PENDING
from schedule_sdk.adapters.sql.tables import UTCDateTime
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.ports import DueScan, Occurrence, OpenOccurrence


class SQLDueScan(DueScan):
    def __init__(self, connections: Connections) -> None:
        self._connections = connections

    def scan_pending_due(
        self, until: datetime, after: tuple[datetime, str] | None, limit: int
    ) -> list[OpenOccurrence]:
        statement = (
            sa.select(t.c.id, t.c.occurrence, t.c.attempt, t.c.run_at)
            .where(PENDING, t.c.run_at <= sa.bindparam("until", until, type_=UTCDateTime))
            .order_by(t.c.run_at, t.c.id)
            .limit(limit)
        )
        if after is not None:
            at = sa.bindparam("after_at", after[0], type_=UTCDateTime)
            statement = statement.where(sa.or_(t.c.run_at > at, sa.and_(t.c.run_at == at, t.c.id > after[1])))
        with self._connections.read() as conn:
            rows = conn.execute(statement).all()
        return [
            OpenOccurrence(Occurrence(job_id, occurrence, attempt, run_at), True)
            for job_id, occurrence, attempt, run_at in rows
        ]
