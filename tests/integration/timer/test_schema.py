"""timer_schedules as migration 0002 defines it, on SQLite and PostgreSQL: columns, primary key, CHECK,
STRICT, both indexes, the per-tenant due query's plan, and the optional service_calls foreign key."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.timers import due_query
from schedule_sdk.timer import Timer, TimerSettings
from tests.support.timer_fixtures import command, store_engine, store_settings

COLUMNS = ["tenant_id", "service_call_id", "correlation_id", "due_at", "registered_at", "reached_at", "state"]


@pytest.fixture
def engine(timer_db):
    engine = store_engine(timer_db)
    yield engine
    engine.dispose()


def test_table_matches_seed_003(engine):
    schema.upgrade(engine)
    inspector = sa.inspect(engine)
    columns = {c["name"]: c for c in inspector.get_columns("timer_schedules")}
    assert list(columns) == COLUMNS
    assert [name for name, c in columns.items() if c["nullable"]] == ["reached_at"]
    assert inspector.get_pk_constraint("timer_schedules")["constrained_columns"] == [
        "tenant_id",
        "service_call_id",
    ]
    indexes = {i["name"]: i["column_names"] for i in inspector.get_indexes("timer_schedules")}
    assert indexes == {
        "idx_timer_schedules_due_at": ["tenant_id", "state", "due_at"],
        "idx_timer_schedules_correlation_id": ["correlation_id"],
    }
    assert inspector.get_foreign_keys("timer_schedules") == []  # not configured
    checks = " ".join(c["sqltext"] for c in inspector.get_check_constraints("timer_schedules"))
    assert "Scheduled" in checks and "Reached" in checks
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            assert (
                conn.execute(sa.text("SELECT strict FROM pragma_table_list('timer_schedules')")).scalar() == 1
            )
        else:
            kinds = dict(
                conn.execute(
                    sa.text(
                        "SELECT column_name, data_type FROM information_schema.columns "
                        "WHERE table_name = 'timer_schedules'"
                    )
                ).all()
            )
            assert kinds["due_at"] == kinds["registered_at"] == "timestamp with time zone"


def _insert(conn, **values):
    row = {
        "tenant_id": "t",
        "service_call_id": "s",
        "correlation_id": "c",
        "due_at": "2026-11-21T10:00:00.000Z",
        "registered_at": "2026-11-21T09:00:00.000Z",
        "state": "Scheduled",
    }
    row.update(values)
    conn.execute(
        sa.text(
            "INSERT INTO timer_schedules"
            " (tenant_id, service_call_id, correlation_id, due_at, registered_at, state)"
            " VALUES (:tenant_id, :service_call_id, :correlation_id, :due_at, :registered_at, :state)"
        ),
        row,
    )


def test_check_constraint_refuses_other_states(engine):
    schema.upgrade(engine)
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        _insert(conn, state="Fired")


def test_strict_refuses_wrongly_typed_values_on_sqlite(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'strict.db'}")
    schema.upgrade(engine)
    with pytest.raises(sa.exc.IntegrityError, match="cannot store BLOB"), engine.begin() as conn:
        _insert(conn, due_at=b"\x00\x01")
    engine.dispose()


def test_per_tenant_due_query_uses_the_due_at_index(engine):
    schema.upgrade(engine)
    query = due_query("tenant-a", datetime(2026, 11, 14, 10, tzinfo=UTC), 100)
    compiled = query.compile(engine, compile_kwargs={"literal_binds": True})
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            plan = [row[3] for row in conn.execute(sa.text(f"EXPLAIN QUERY PLAN {compiled}"))]
            assert plan[0].startswith("SEARCH timer_schedules USING INDEX idx_timer_schedules_due_at")
            assert "(tenant_id=? AND state=? AND due_at<?)" in plan[0]
            assert not any("SCAN" in step for step in plan)  # no table scan, no sort step
        else:  # a tiny table would be seq-scanned: forbid that to see which index the planner takes
            conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
            plan = "\n".join(row[0] for row in conn.execute(sa.text(f"EXPLAIN {compiled}")))
            assert "idx_timer_schedules_due_at" in plan
            assert "Seq Scan" not in plan


def _service_calls(engine):
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE service_calls (tenant_id TEXT NOT NULL, service_call_id TEXT NOT NULL,"
                " PRIMARY KEY (tenant_id, service_call_id))"
            )
        )
        conn.execute(sa.text("INSERT INTO service_calls VALUES ('tenant-a', 'sc-1')"))


def test_service_calls_foreign_key_cascades_when_configured(engine, timer_db):
    _service_calls(engine)
    settings = TimerSettings.load(
        {**store_settings(timer_db), "broker_url": "inprocess", "service_calls_fk": True}, {}
    )
    timer = Timer(settings)
    try:
        engine.dispose()  # SQLite PRAGMAs on an older connection would not see the new table
        fks = sa.inspect(engine).get_foreign_keys("timer_schedules")
        assert [
            (f["referred_table"], f["constrained_columns"], f["options"].get("ondelete")) for f in fks
        ] == [("service_calls", ["tenant_id", "service_call_id"], "CASCADE")]
        timer.schedule(command("tenant-a", "sc-1", ms=60_000))
        assert timer.queries.get("tenant-a", "sc-1") is not None
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM service_calls WHERE tenant_id = 'tenant-a'"))
        assert timer.queries.get("tenant-a", "sc-1") is None
    finally:
        timer.close()


def test_a_timer_for_an_unknown_service_call_is_refused_when_the_foreign_key_is_on(engine, timer_db):
    from schedule_sdk.domain.errors import InvalidTimerCommand

    _service_calls(engine)
    settings = TimerSettings.load(
        {**store_settings(timer_db), "broker_url": "inprocess", "service_calls_fk": True}, {}
    )
    timer = Timer(settings)
    try:
        results = timer.service.handle_each([command("tenant-a", "sc-1"), command("tenant-a", "unknown")])
        assert results[0].value == "created"
        assert isinstance(results[1], InvalidTimerCommand)
        assert timer.queries.get("tenant-a", "unknown") is None
        with engine.begin() as conn:  # nothing written for it, not even its job
            jobs = conn.execute(sa.text("SELECT owner_id FROM schedule_jobs")).scalars().all()
        assert jobs == ["sc-1"]
        assert timer.metrics.count("timer.commands.rejected") == 1
    finally:
        timer.close()
