"""A worker with nothing due does not busy-poll its store."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from schedule_sdk import OneShotSpec
from tests.support.waiting import wait_until

#: Statements an idle worker may run per heartbeat, its poller's safety net aside: the beat itself,
#: the maintenance pass's look at the registry and at expired leases, and a poller's look after a
#: wake-up. A poller or watcher that queried on every short tick would run dozens.
PER_BEAT = 6
#: What a window from one beat to another can hold beyond whole cycles: the maintenance pass runs
#: on a thread of its own at the same interval, out of phase with the beat, so one more of its
#: passes (the registry and the lease look) can fall between two beats.
EDGE = 2
#: PostgreSQL's incarnation read: once at start and once per connection the pool opens, not per beat.
INCARNATION = "SELECT pg_postmaster_start_time()"
SAFETY_NET = 300.0
BEATS = 4

#: What is not a statement of its own (the driver's transaction control, the watcher's pragma).
_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "PRAGMA")


class Statements:
    """Counts the statements run on ``engine`` (SQLite: at the driver, so the claims' own driver
    statements count too), the worker's heartbeats among them, and the connections opened on
    ``engine`` and on ``others`` (PostgreSQL's claims engine: the store reads its incarnation
    again after a connection of either)."""

    def __init__(self, engine: sa.Engine, *others: sa.Engine | None) -> None:
        self._lock = threading.Lock()
        self.texts: list[str] = []
        self.incarnation_reads = 0
        self.connects = 0
        for each in (engine, *others):
            if each is not None:
                sa.event.listen(each, "connect", self._connected)
        if engine.dialect.name == "sqlite":
            sa.event.listen(engine, "checkout", self._trace)
            engine.dispose()  # connections made before are made again, traced
        else:
            sa.event.listen(engine, "before_cursor_execute", self._executed)

    def _trace(self, dbapi_connection: Any, *_: Any) -> None:
        dbapi_connection.set_trace_callback(self._seen)

    def _executed(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        self._seen(statement)

    def _connected(self, *_: Any) -> None:
        with self._lock:
            self.connects += 1

    def _seen(self, statement: str) -> None:
        text = " ".join(statement.split())
        if text.startswith(INCARNATION):
            with self._lock:
                self.incarnation_reads += 1
        elif not text.upper().startswith(_CONTROL):
            with self._lock:
                self.texts.append(text)

    def reset(self) -> None:
        with self._lock:
            self.texts.clear()  # the connections and incarnation reads count from the start

    def beats(self) -> int:
        with self._lock:
            return len(self._beat_indexes())

    def between_beats(self) -> tuple[int, int]:
        """The statements run from the first beat seen to the last one (so whole beat cycles,
        wherever :meth:`reset` fell in one), and the cycles that span."""
        with self._lock:
            marks = self._beat_indexes()
            return marks[-1] - marks[0], len(marks) - 1

    def _beat_indexes(self) -> list[int]:
        return [i for i, t in enumerate(self.texts) if t.startswith("UPDATE schedule_workers SET last_beat")]


@pytest.mark.parametrize(
    "backend_combination",
    [
        pytest.param(("sqlite", "sql"), id="sqlite-sql"),
        pytest.param(("postgres", "sql"), id="postgres-sql", marks=pytest.mark.postgres),
    ],
    indirect=True,
)
def test_an_idle_worker_runs_a_few_statements_per_heartbeat_not_a_busy_poll(backend):
    h = backend.harness(poll_interval=SAFETY_NET)  # its own polls aside: what else runs
    statements = Statements(h.container.engine(), h.container.store().connections.claims)
    h.start()
    later = datetime.now(UTC) + timedelta(hours=1)  # the poller sleeps toward it
    h.service.schedule_at(OneShotSpec(topic="tests.idle", run_at=later, timezone="UTC"))
    h.settle()
    statements.reset()
    assert wait_until(lambda: statements.beats() >= BEATS + 1, 30), statements.texts
    seen, cycles = statements.between_beats()
    assert seen <= PER_BEAT * cycles + EDGE, (seen, cycles, statements.texts)
    assert statements.incarnation_reads <= 1 + statements.connects  # at start, then per new connection
