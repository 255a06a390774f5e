"""PostgreSQL: the outcomes of fires commit without waiting for the WAL flush; nothing else does.

``outcome_transaction`` starts with ``SET LOCAL synchronous_commit = off``: this transaction only,
so the setting never leaks to the next one on the same pooled connection, nor, through PgBouncer,
to another client's transaction on the same server session. A fire's outcome is written in one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from schedule_sdk import OneShotSpec
from tests.conftest import Backend

pytestmark = pytest.mark.postgres

SHOW = sa.text("SHOW synchronous_commit")


@pytest.fixture
def backend(postgres_either: Backend) -> Backend:
    return postgres_either


def test_only_the_outcome_transaction_skips_the_flush_wait(backend: Backend) -> None:
    store: Any = backend.harness(pool_size=1).store  # one connection: every transaction reuses it
    with store.transaction() as tx:
        assert tx.connection.execute(SHOW).scalar() == "on"
    with store.outcome_transaction() as tx:
        assert tx.connection.execute(SHOW).scalar() == "off"
    for _ in range(3):
        with store.transaction() as tx:
            assert tx.connection.execute(SHOW).scalar() == "on"


def test_a_fires_outcome_is_written_in_an_outcome_transaction(backend: Backend) -> None:
    h = backend.harness(poll_interval=0.2)
    engine: sa.Engine = h.store.engine  # type: ignore[attr-defined]
    statements: list[tuple[int, str, Any]] = []

    @event.listens_for(engine, "begin")
    def begun(conn: sa.Connection) -> None:
        statements.append((id(conn), "BEGIN", None))

    @event.listens_for(engine, "before_cursor_execute")
    def executed(conn: sa.Connection, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        statements.append((id(conn), statement, params))

    h.start()
    due = datetime.now(UTC) + timedelta(seconds=0.3)
    spec = OneShotSpec(topic="outcomes.job", run_at=due, timezone="UTC")
    job = h.service.schedule_at(spec)
    h.wait_status(job.id, "completed")
    h.stop()

    def completes(statement: str, params: Any) -> bool:
        shown = repr(params)
        return statement.startswith("UPDATE schedule_jobs") and "completed" in shown and job.id in shown

    completing = [i for i, (_, statement, params) in enumerate(statements) if completes(statement, params)]
    assert completing, "no outcome update was seen"
    conn_id = statements[completing[0]][0]
    own = [statement for c, statement, _ in statements[: completing[0]] if c == conn_id]
    opened = len(own) - 1 - own[::-1].index("BEGIN")
    assert own[opened + 1] == "SET LOCAL synchronous_commit = off", own[opened:]
