"""The SQL job store's retention: deleting finished jobs, one purger at a time across processes."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from schedule_sdk.adapters.sql.connections import Connections
from schedule_sdk.adapters.sql.engine import translate_errors
from schedule_sdk.adapters.sql.statements import PURGE, PURGE_PG
from schedule_sdk.ports import Retention

#: The PostgreSQL advisory lock key held by the transaction of each purge batch.
PURGE_LOCK_KEY = 0x5C4ED_9C6


class SQLRetention(Retention):
    """:class:`~schedule_sdk.ports.Retention` on the SQL job store's connections."""

    def __init__(self, connections: Connections) -> None:
        self.connections = connections

    @property
    def one_writer(self) -> bool:
        """SQLite: one write transaction at a time."""
        return not self.connections.is_pg

    def purge_finished(self, before: datetime, limit: int, *, wait: bool = False) -> int | None:
        if not self.connections.is_pg:
            return self._purge_sqlite(before, limit)
        with self.connections.write() as conn:
            # One purger at a time: a transaction-scoped advisory lock.
            lock = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
            taken = conn.execute(sa.text(f"SELECT {lock}(:key)"), {"key": PURGE_LOCK_KEY}).scalar()
            if not wait and not taken:
                return None
            return int(conn.execute(PURGE_PG, {"p_before": before, "p_limit": limit}).rowcount)

    def _purge_sqlite(self, before: datetime, limit: int) -> int:
        """One batch on SQLite: the write transaction (BEGIN IMMEDIATE) excludes every other writer,
        purgers included. A batch dirties many pages, so a commit on a connection with the usual
        ``wal_autocheckpoint`` often runs a checkpoint (a copy and an fsync) while this
        process's writer lock is still held, and a claim waits for it. The purge connection never
        checkpoints by itself: it checkpoints (PASSIVE, which waits for no writer or reader) after
        releasing the lock."""
        purger = self.connections.purger()
        with self.connections.write(purger) as conn:
            deleted = int(conn.execute(PURGE, {"p_before": before, "p_limit": limit}).rowcount)
        if deleted:
            with translate_errors():
                raw = purger.raw_connection()
                try:
                    raw.cursor().execute("PRAGMA wal_checkpoint(PASSIVE)")
                finally:
                    raw.close()
        return deleted
