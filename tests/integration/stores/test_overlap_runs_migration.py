"""Migration 0022 (the runs of overlap ``allow``): rows written before it read back as jobs that
are no run; a run round-trips after it; the downgrade drops the column again."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa
from alembic import command

from schedule_sdk import IntervalRepeat, RepeatSpec, ScheduledJob
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore, to_row
from schedule_sdk.adapters.sql.tables import schedule_jobs
from schedule_sdk.testing.contracts.rows import NOW

#: The revision 0022 follows.
BEFORE = importlib.import_module(
    "schedule_sdk.adapters.sql.migrations.versions.0022_overlap_runs"
).down_revision


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, database_url_factory: Callable[[str], str]) -> Iterator[sa.Engine]:
    made = make_engine(database_url_factory(request.param), pool_size=2)
    yield made
    made.dispose()


def migrate(engine: sa.Engine, move: Callable[..., None], revision: str) -> None:
    config = schema._config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        move(config, revision)


def test_rows_from_before_0022_are_no_runs_and_a_run_round_trips_after_it(engine):
    assert BEFORE == "0020"
    schema.upgrade(engine, BEFORE)
    spec = RepeatSpec(topic="m.t", timezone="UTC", repeat=IntervalRepeat(every_ms=60_000), overlap="allow")
    old = ScheduledJob.first_of(spec, "01900000-0000-7000-8000-000000000022", NOW)
    with engine.begin() as conn:  # a row as a release before 0022 wrote it
        later = ("run_of", "last_outcome", "notice")  # columns of later revisions
        conn.execute(sa.insert(schedule_jobs), {k: v for k, v in to_row(old).items() if k not in later})
    schema.upgrade(engine)
    store = SQLAlchemyJobStore(engine)
    try:
        read = store.get(old.id)
        assert read == old and read is not None and read.run_of is None
        run = old.run_for("01900000-0000-7000-8000-000000000023", NOW)
        with store.transaction() as tx:
            tx.insert(run)
        assert store.get(run.id) == run and run.run_of == old.id
    finally:
        store.close()
    migrate(engine, command.downgrade, BEFORE)
    assert "run_of" not in {c["name"] for c in sa.inspect(engine).get_columns("schedule_jobs")}
    schema.upgrade(engine)
    assert schema.current_revision(engine) == schema.head_revision()
