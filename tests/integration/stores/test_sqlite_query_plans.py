"""SQLite's plans for the statements on every fire's path: index lookups, never a scan of the
pending rows (a claim that reads every pending row grows with the backlog; measured before the
fix: W3 p99 112 ms on sqlite + rq with 6,000 pending rows)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from schedule_sdk.adapters.sql import schema, statements
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.domain.jobs import JobQuery
from schedule_sdk.domain.status import JobStatus

BY_ID, DUE = "sqlite_autoindex_schedule_jobs_1", "ix_schedule_jobs_pending_due"
STATEMENTS = {
    "claim_due": (statements.CLAIM_DUE, [BY_ID, DUE]),
    "claim_many": (statements.CLAIM_MANY, [BY_ID]),
    "next_due_at": (sa.select(sa.func.min(t.c.run_at)).where(statements.PENDING), [DUE]),
    "release_expired": (
        sa.select(t.c.id).where(statements.ACTIVE, t.c.claimed_until < sa.bindparam("now")),
        ["ix_schedule_jobs_active_claimed"],
    ),
    # the read that release_expired makes before it writes
    "any_expired": (statements.ANY_EXPIRED, ["ix_schedule_jobs_active_claimed"]),
    # retention reads finished rows through their own index, never the open ones
    "purge_finished": (statements.PURGE, [BY_ID, "ix_schedule_jobs_finished"]),
}


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_hot_statements_use_their_index(name: str, tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    schema.upgrade(engine)
    engine.dispose()
    statement, indexes = STATEMENTS[name]
    sql = str(statement.compile(dialect=engine.dialect))
    sql = sql.replace("(__[POSTCOMPILE_c_keys])", "(VALUES ('a', 1, 1))")
    sql = sql.replace("(__[POSTCOMPILE_c_ids])", "('a')").replace("LIMIT ?", "LIMIT 5").replace("?", "'2026'")
    with sqlite3.connect(tmp_path / "jobs.db") as connection:
        plan = [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + sql)]
    assert not [step for step in plan if step.startswith("SCAN schedule_jobs")], plan
    for index in indexes:
        assert any(index in step for step in plan), plan


def _plan(tmp_path: Path, sql: str) -> list[str]:
    engine = make_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    schema.upgrade(engine)
    engine.dispose()
    with sqlite3.connect(tmp_path / "jobs.db") as connection:
        return [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + sql)]


def _sql(statement: sa.ClauseElement) -> str:
    from sqlalchemy.dialects import sqlite

    dialect = sqlite.dialect()
    return str(statement.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


@pytest.mark.parametrize(
    ("name", "index"),
    [
        ("a status other than pending", "ix_schedule_jobs_status"),
        ("one job's history", "ix_schedule_fires_job"),
        ("a window of fires", "ix_schedule_fires_fired"),
    ],
)
def test_dashboard_reads_use_their_index(name: str, index: str, tmp_path: Path) -> None:
    """The dashboard's reads at a million rows: by index, never a table scan."""
    from schedule_sdk.adapters.sql.tables import NOT_PENDING_CONDITION
    from schedule_sdk.adapters.sql.tables import schedule_fires as f

    statements = {
        "a status other than pending": sa.select(t.c.id)
        .where(t.c.status.in_(["failed"]), sa.text(NOT_PENDING_CONDITION))
        .order_by(t.c.id)
        .limit(51),
        "one job's history": sa.select(f.c.id)
        .where(f.c.job_id == "a")
        .order_by(f.c.fired_at.desc())
        .limit(50),
        "a window of fires": sa.select(sa.func.count()).where(
            f.c.fired_at >= sa.literal_column("'2030'"), f.c.fired_at <= sa.literal_column("'2031'")
        ),
    }
    plan = _plan(tmp_path, _sql(statements[name]))
    assert not [step for step in plan if step.startswith("SCAN")], plan
    assert any(index in step for step in plan), plan


AFTER = "01900000-0000-7000-8000-000000000000"
#: list() pages: the filter's (column, id) index or the primary key, in id order, so a page reads
#: about ``limit`` index entries however many jobs there are (never every match, then a sort).
LIST_PAGES = {
    "owner and status": (
        JobQuery(owner_id="o", statuses=frozenset({JobStatus.PENDING})),
        "ix_schedule_jobs_owner",
    ),
    "tenant, next page": (JobQuery(tenant_id="t", after_id=AFTER), "ix_schedule_jobs_tenant"),
    "topic": (JobQuery(topic="billing.due"), "ix_schedule_jobs_topic"),
    "no filter, next page": (JobQuery(after_id=AFTER), BY_ID),
}


@pytest.mark.parametrize("name", list(LIST_PAGES))
def test_list_pages_walk_an_index_in_id_order(name: str, tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    schema.upgrade(engine)
    engine.dispose()
    query, index = LIST_PAGES[name]
    statement = statements.list_statement(query)
    sql = str(statement.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    with sqlite3.connect(tmp_path / "jobs.db") as connection:
        plan = [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + sql)]
    assert len(plan) == 1 and index in plan[0], plan  # one index walk, no temp b-tree sort
