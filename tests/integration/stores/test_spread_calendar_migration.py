"""Migration 0019 (spread, jitter, calendar): rows written before it read back as jobs with none
of them; a job with all three round-trips after it; the downgrade drops the columns again."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from datetime import date, timedelta

import pytest
import sqlalchemy as sa
from alembic import command

from schedule_sdk import Calendar, CronRepeat, HolidaySpec, RepeatSpec, ScheduledJob
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore, to_row
from schedule_sdk.adapters.sql.tables import schedule_jobs
from schedule_sdk.testing.contracts.rows import NOW

NEW_COLUMNS = ("spread_ms", "spread_offset_ms", "jitter_ms", "calendar")
#: The revision 0019 follows (the newest before it).
BEFORE = importlib.import_module(
    "schedule_sdk.adapters.sql.migrations.versions.0019_spread_and_calendars"
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


def spec(**options: object) -> RepeatSpec:
    return RepeatSpec(
        topic="m.t", timezone="Europe/Berlin", repeat=CronRepeat(expression="0 9 * * *"), **options
    )  # type: ignore[arg-type]


def test_rows_from_before_0019_read_back_without_spread_or_calendar_and_new_ones_round_trip(engine):
    schema.upgrade(engine, BEFORE)
    old = ScheduledJob.first_of(spec(), "01900000-0000-7000-8000-000000000019", NOW)
    present = {c["name"] for c in sa.inspect(engine).get_columns("schedule_jobs")} - set(NEW_COLUMNS)
    with engine.begin() as conn:  # a row as a release before 0019 wrote it (no later column either)
        conn.execute(sa.insert(schedule_jobs), {k: v for k, v in to_row(old).items() if k in present})
    schema.upgrade(engine)
    store = SQLAlchemyJobStore(engine)
    try:
        read = store.get(old.id)
        assert read is not None and read == old
        assert (read.spread_ms, read.spread_offset_ms, read.jitter_ms, read.calendar) == (None, 0, None, None)
        calendar = Calendar(dates=[date(2027, 12, 24)], weekdays=["sun"], holidays=HolidaySpec(country="DE"))
        new = ScheduledJob.first_of(
            spec(spread=timedelta(minutes=20), jitter=timedelta(seconds=9), calendar=calendar),
            "01900000-0000-7000-8000-000000000020",
            NOW,
        )
        with store.transaction() as tx:
            tx.insert(new)
        assert store.get(new.id) == new
    finally:
        store.close()
    migrate(engine, command.downgrade, BEFORE)
    columns = {c["name"] for c in sa.inspect(engine).get_columns("schedule_jobs")}
    assert not columns & set(NEW_COLUMNS)
    schema.upgrade(engine)
    assert schema.current_revision(engine) == schema.head_revision()
