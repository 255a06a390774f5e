"""The SQL job store's worker registry (``schedule_workers``): heartbeats, the store's clock and
incarnation, and the release of dead workers' claims (and of a live worker's claims whose outcome a
server restart lost)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa

from schedule_sdk.adapters.sql import sessions
from schedule_sdk.adapters.sql.connections import Connections
from schedule_sdk.adapters.sql.engine import translate_errors
from schedule_sdk.adapters.sql.rows import from_row
from schedule_sdk.adapters.sql.statements import ACTIVE, once
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.adapters.sql.tables import schedule_workers as w
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import OccurrenceRef, RestartRepair, WorkerInfo, WorkerRegistry

#: The statements run every second, built once (a statement built per call costs more than its run).
_BEATEN = ("last_beat", "in_flight", "stuck", "clock_offset", "clock_error")
BEAT = (
    sa.update(w)
    .where(w.c.id == sa.bindparam("b_id"))
    .values({name: sa.bindparam(f"b_{name}", type_=w.c[name].type) for name in _BEATEN})
)
WORKERS = sa.select(w).order_by(w.c.id)
INCARNATION = sa.text("SELECT pg_postmaster_start_time()::text")


class SQLWorkerRegistry(WorkerRegistry, RestartRepair):
    """:class:`~schedule_sdk.ports.WorkerRegistry` and :class:`~schedule_sdk.ports.RestartRepair`
    on the SQL job store's connections."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        #: Physical connections opened so far, and how many there were at the last incarnation
        #: read: a restarted server has dropped every connection, so no statement reaches it again
        #: before a new one is opened; while none is, the incarnation read before still holds.
        self._connects = 0
        self._incarnation: tuple[int, str] | None = None
        if connections.is_pg:
            for engine in (connections.engine, connections.claims):
                if engine is not None:
                    sa.event.listen(engine, "connect", self._connected)

    def _connected(self, *_: object) -> None:
        self._connects += 1

    def beat(self, worker: WorkerInfo) -> None:
        params = {f"b_{name}": getattr(worker, name) for name in _BEATEN}
        with self.connections.write(light=True) as conn:  # one small row: no checkpoint of its own
            updated = conn.execute(BEAT, {"b_id": worker.id, **params}).rowcount
            if not updated:
                conn.execute(sa.insert(w), dataclasses.asdict(worker))

    def store_clock(self) -> datetime | None:
        """PostgreSQL's ``clock_timestamp()``, one autocommit round trip; None on SQLite, which
        has no clock of its own (its time is the clock of the machine its processes share).
        Read on the durable pool, in autocommit: its sessions take no start-up option, so a worker
        misconfigured behind a transaction pooler still reaches the check that names the problem."""
        if not self.connections.is_pg:
            return None
        with translate_errors(), self.connections.engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            value = conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one()
        assert isinstance(value, datetime)
        return value.astimezone(UTC)

    def workers(self) -> list[WorkerInfo]:
        with self.connections.peek() as conn:  # one statement: no transaction around it
            rows = conn.execute(WORKERS).mappings().all()
        return [WorkerInfo(**dict(row)) for row in rows]

    def remove_worker(self, worker_id: str) -> None:
        with self.connections.write() as conn:
            conn.execute(sa.delete(w).where(w.c.id == worker_id))

    def release_dead(
        self, beat_before: datetime, also: Sequence[str], now: datetime, limit: int
    ) -> list[ScheduledJob]:
        dead = sa.select(w.c.id).where(sa.or_(w.c.last_beat < beat_before, w.c.id.in_(list(also))))
        chosen = (
            sa.select(t.c.id)
            .where(ACTIVE, t.c.claimed_by.in_(dead))
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        statement = (
            sa.update(t)
            .where(t.c.id.in_(once(chosen)), ACTIVE)
            .values(status="pending", claimed_by=None, claimed_until=None, updated_at=now)
            .returning(*t.c)
        )
        with self.connections.write() as conn:
            if self.connections.is_pg:  # their sessions left inside a transaction would hide locked claims
                sessions.end_sessions_of(conn, conn.execute(dead).scalars().all())
            rows = conn.execute(statement).mappings().all()
        return [from_row(r) for r in rows]

    def forget_workers(self, beat_before: datetime) -> int:
        with self.connections.write() as conn:
            return int(conn.execute(sa.delete(w).where(w.c.last_beat < beat_before)).rowcount)

    def store_incarnation(self) -> str | None:
        """PostgreSQL: its postmaster's start time (one autocommit round trip, read again only
        after this store opened a new connection: a restart drops them all); None on SQLite,
        whose commits a restart of this process does not lose."""
        if not self.connections.is_pg:
            return None
        known = self._incarnation
        if known is not None and known[0] == self._connects:
            return known[1]  # no connection opened since: the server is the one read before
        connects = self._connects
        with self.connections.peek() as conn:
            incarnation = str(conn.execute(INCARNATION).scalar_one())
        self._incarnation = (connects, incarnation)
        return incarnation

    def claims_of(self, worker_id: str) -> list[OccurrenceRef]:
        statement = sa.select(t.c.id, t.c.occurrence, t.c.attempt).where(ACTIVE, t.c.claimed_by == worker_id)
        with self.connections.peek() as conn:
            return [(r.id, r.occurrence, r.attempt) for r in conn.execute(statement)]

    def release_claims_at(
        self, worker_id: str, claims: Sequence[OccurrenceRef], now: datetime
    ) -> list[ScheduledJob]:
        if not claims:
            return []
        statement = (
            sa.update(t)
            .where(
                ACTIVE,
                t.c.claimed_by == worker_id,
                sa.tuple_(t.c.id, t.c.occurrence, t.c.attempt).in_([tuple(c) for c in claims]),
            )
            .values(status="pending", claimed_by=None, claimed_until=None, updated_at=now)
            .returning(*t.c)
        )
        with self.connections.write() as conn:
            rows = conn.execute(statement).mappings().all()
        return [from_row(r) for r in rows]
