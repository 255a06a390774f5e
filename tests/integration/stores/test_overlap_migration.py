"""Migration 0016 (the overlap policy column) on SQLite and PostgreSQL: rows written before it
read as "no policy", the downgrade drops the column, and a stored policy reads back."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa
from alembic import command

from schedule_sdk import IntervalRepeat
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore, to_row
from schedule_sdk.adapters.sql.tables import schedule_jobs
from schedule_sdk.testing.contracts.rows import insert, job


@pytest.mark.parametrize("store_kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_rows_from_before_0016_have_no_policy_and_the_downgrade_drops_the_column(
    store_kind: str, database_url_factory: Callable[[str], str]
) -> None:
    engine = make_engine(database_url_factory(store_kind), pool_size=2)
    config = schema._config()
    try:
        schema.upgrade(engine)
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0015")
        columns = {c["name"] for c in sa.inspect(engine).get_columns("schedule_jobs")}
        assert "overlap" not in columns
        old = job()
        row = {k: v for k, v in to_row(old).items() if k in columns}  # the columns of 0015
        with engine.begin() as conn:  # written as before 0016: without the column
            conn.execute(sa.insert(schedule_jobs), [row])
        schema.upgrade(engine)
        store = SQLAlchemyJobStore(engine)
        stored = store.get(old.id)
        assert stored is not None and stored.overlap is None
        new = job(overlap="skip", repeat=IntervalRepeat(every_ms=1000))
        insert(store, new)
        stored_new = store.get(new.id)
        assert stored_new is not None and stored_new.overlap == "skip"
        store.close()
    finally:
        engine.dispose()
