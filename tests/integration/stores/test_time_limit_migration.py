"""Migration 0018 (time limits) on SQLite and PostgreSQL: rows written before it read back with
no time limit and no stuck thread; a ``timeout`` fire needs it; its downgrade keeps timed-out
attempts as failed ones, and the upgrade after it works again."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.script import ScriptDirectory

from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore, to_row
from schedule_sdk.adapters.sql.tables import schedule_fires, schedule_jobs, schedule_workers
from schedule_sdk.domain.history import FireOutcome
from schedule_sdk.ports import FireHistory, WorkerInfo, WorkerRegistry, require
from schedule_sdk.testing.contracts.rows import NOW, fire, job


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, database_url_factory: Callable[[str], str]) -> Iterator[sa.Engine]:
    made = make_engine(database_url_factory(request.param), pool_size=2)
    yield made
    made.dispose()


def _to(engine: sa.Engine, revision: str, step: str = "upgrade") -> None:
    config = schema._config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        getattr(command, step)(config, revision)


def _before_0018() -> str:
    """The revision 0018 follows."""
    before = ScriptDirectory.from_config(schema._config()).get_revision("0018").down_revision
    assert isinstance(before, str)
    return before


def _row(engine: sa.Engine, table: str, values: dict[str, object]) -> dict[str, object]:
    """``values`` with only the columns ``table`` has now."""
    columns = {c["name"] for c in sa.inspect(engine).get_columns(table)}
    return {k: v for k, v in values.items() if k in columns}


def test_rows_from_before_read_back_and_the_downgrade_keeps_timeouts_as_failures(engine: sa.Engine) -> None:
    before = _before_0018()
    _to(engine, before)
    old = job()
    worker = WorkerInfo(id="w1", host="h", pid=1, substrate="sql", started_at=NOW, last_beat=NOW)
    with engine.begin() as conn:
        conn.execute(sa.insert(schedule_jobs), [_row(engine, "schedule_jobs", to_row(old))])
        values = dataclasses.asdict(worker)
        conn.execute(sa.insert(schedule_workers), [_row(engine, "schedule_workers", values)])
    _to(engine, "head")
    store = SQLAlchemyJobStore(engine)
    try:
        stored = store.get(old.id)
        assert stored is not None and stored.time_limit is None
        assert [w.stuck for w in require(store, WorkerRegistry, "the test").workers()] == [0]
        limited = job(time_limit=timedelta(seconds=3))
        timed_out = fire(outcome=FireOutcome.TIMEOUT, error="ListenerTimedOut: x", job_id=limited.id)
        with store.transaction() as tx:
            tx.insert(limited)
            tx.record_fires([timed_out])
        assert store.get(limited.id).time_limit == timedelta(seconds=3)  # type: ignore[union-attr]
        assert [f.outcome for f in require(store, FireHistory, "the test").history(limited.id, 10)] == [
            FireOutcome.TIMEOUT
        ]
    finally:
        store.close()
    _to(engine, before, "downgrade")
    with engine.begin() as conn:
        outcomes = conn.execute(sa.select(schedule_fires.c.outcome)).scalars().all()
    assert outcomes == ["failed"]
    _to(engine, "head")
