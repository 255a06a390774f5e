"""PostgreSQL's plans for the claims, the poller's wake-up, retention and list() pages on a table
of 200,000 analysed rows (mostly finished, some pending, active and paused): each reads its index,
never the whole table, and a list page walks its index in id order (no sort of every match)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from schedule_sdk.adapters.sql import statements
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.fast import pg_claims
from schedule_sdk.domain.jobs import JobQuery
from schedule_sdk.domain.status import JobStatus

#: One pytest-xdist worker runs the module: one filled database (a module fixture).
pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("query-plans")]

ROWS = 200_000
FILL = """
INSERT INTO schedule_jobs (id, topic, status, run_at, scheduled_for, timezone, retry, occurrence,
    attempt, occurrence_count, owner_id, tenant_id, claimed_until, created_at, updated_at)
SELECT '01900000-0000-7000-8000-' || lpad(i::text, 12, '0'),
    'topic-' || (i %% 50),
    (ARRAY['completed', 'completed', 'cancelled', 'pending', 'active', 'paused'])[i %% 6 + 1],
    now() + i * interval '1 second', now() + i * interval '1 second', 'UTC', '{}', 1, 1, 0,
    'owner-' || (i %% 1000), 'tenant-' || (i %% 997), now() + interval '1 minute', now(), now()
FROM generate_series(1, %(rows)s) AS i"""
NOW = datetime(2030, 1, 1, tzinfo=UTC)
AFTER = "01900000-0000-7000-8000-000000100000"


@pytest.fixture(scope="module")
def database(postgres_databases: Any) -> Iterator[str]:
    url = postgres_databases.create("plans")
    with psycopg.connect(sa.make_url(url).set(drivername="postgresql").render_as_string(False)) as conn:
        conn.execute(FILL, {"rows": ROWS})
        conn.commit()
        conn.execute("ANALYZE schedule_jobs")
        conn.commit()
    yield url
    postgres_databases.drop(url)


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def explain(url: str, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    with psycopg.connect(sa.make_url(url).set(drivername="postgresql").render_as_string(False)) as conn:
        [(plan,)] = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchall()
    document = plan if isinstance(plan, list) else json.loads(plan)
    return list(_nodes(document[0]["Plan"]))


def assert_reads_index(nodes: list[dict[str, Any]], index: str) -> None:
    scans = [n for n in nodes if n.get("Relation Name") == "schedule_jobs"]
    assert scans, nodes
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"], scans
    assert any(n.get("Index Name") == index for n in scans), scans


CLAIMS = {
    "claim_due": (
        pg_claims.CLAIM_DUE,
        {"now": NOW, "worker": "w", "lease": NOW, "limit": 50},
        "ix_schedule_jobs_pending_due",
    ),
    "claim_many": (
        pg_claims.CLAIM_MANY,
        {"now": NOW, "worker": "w", "lease": NOW, "ids": [AFTER], "occurrences": [1], "attempts": [1]},
        "schedule_jobs_pkey",
    ),
}


@pytest.mark.parametrize("name", list(CLAIMS))
def test_claims_read_their_index(database: str, name: str) -> None:
    sql, params, index = CLAIMS[name]
    assert_reads_index(explain(database, sql, params), index)


STATEMENTS = {
    "next_due_at": (
        sa.select(sa.func.min(statements.t.c.run_at)).where(statements.PENDING),
        "ix_schedule_jobs_pending_due",
    ),
    "purge_finished": (statements.PURGE_PG, "ix_schedule_jobs_finished"),
    # the read that release_expired makes before it writes (nothing expired: the usual case)
    "any_expired": (statements.ANY_EXPIRED, "ix_schedule_jobs_active_claimed"),
}


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_the_poller_and_retention_read_their_index(database: str, name: str) -> None:
    statement, index = STATEMENTS[name]
    engine = make_engine(database)
    sql = str(
        statement.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True})
        if name == "next_due_at"
        else statement.compile(dialect=engine.dialect)
    )
    engine.dispose()
    params = {"p_before": NOW, "p_limit": 100} if name == "purge_finished" else None
    if name == "any_expired":  # the leases of the filled rows end a minute after the fill
        params = {"c_now": datetime.now(UTC), "param_1": 1}
    assert_reads_index(explain(database, sql, params), index)


PAGES = {
    "owner and status": (
        JobQuery(owner_id="owner-7", statuses=frozenset({JobStatus.PENDING}), limit=21),
        "ix_schedule_jobs_owner",
    ),
    "tenant, next page": (
        JobQuery(tenant_id="tenant-3", after_id=AFTER, limit=21),
        "ix_schedule_jobs_tenant",
    ),
    "topic": (JobQuery(topic="topic-9", limit=21), "ix_schedule_jobs_topic"),
    "no filter, next page": (JobQuery(after_id=AFTER, limit=21), "schedule_jobs_pkey"),
}


@pytest.mark.parametrize("name", list(PAGES))
def test_list_pages_walk_an_index_in_id_order(database: str, name: str) -> None:
    query, index = PAGES[name]
    engine = make_engine(database)
    compiled = statements.list_statement(query).compile(
        dialect=engine.dialect, compile_kwargs={"literal_binds": True}
    )
    engine.dispose()
    nodes = explain(database, str(compiled))
    assert_reads_index(nodes, index)
    assert not [n for n in nodes if n["Node Type"] == "Sort"], nodes


@pytest.fixture
def burst(postgres_databases: Any) -> Iterator[str]:
    """A table analysed while every row was pending, then 5,000 rows claimed by one worker (what
    the statistics look like while a burst is being fired: they count no active row)."""
    url = postgres_databases.create("burst")
    with psycopg.connect(sa.make_url(url).set(drivername="postgresql").render_as_string(False)) as conn:
        conn.execute(
            FILL.replace(
                "(ARRAY['completed', 'completed', 'cancelled', 'pending', 'active', 'paused'])[i %% 6 + 1]",
                "'pending'",
            ),
            {"rows": 20_000},
        )
        conn.commit()
        conn.execute("ANALYZE schedule_jobs")
        conn.commit()
        conn.execute(
            "UPDATE schedule_jobs SET status = 'active', claimed_by = 'w' WHERE id IN "
            "(SELECT id FROM schedule_jobs ORDER BY id LIMIT 5000)"
        )
        conn.commit()
    yield url
    postgres_databases.drop(url)


def test_a_fire_outcome_updates_its_row_by_key_during_a_burst(burst: str) -> None:
    """The guarded update that writes each fire's outcome finds its row by id (an index condition
    on id), never by walking every row the worker holds."""
    engine = make_engine(burst)
    statement = statements.update_statement(frozenset({JobStatus.ACTIVE}), True)
    compiled = statement.compile(dialect=engine.dialect)
    engine.dispose()
    params: dict[str, Any] = dict.fromkeys(compiled.params)
    params.update(b_id="01900000-0000-7000-8000-000000000042", b_claimed_by="w", b_occurrence=1)
    nodes = explain(burst, str(compiled), params)
    scans = [n for n in nodes if n.get("Relation Name") == "schedule_jobs" and "Scan" in n["Node Type"]]
    assert scans, nodes
    for scan in scans:
        assert "(id)::text" in scan.get("Index Cond", ""), {
            k: scan.get(k) for k in ("Index Name", "Index Cond", "Filter")
        }


#: A claim's now in ``all_keyed``: 14,000 of its rows are due by then.
KEYED_NOW = datetime.now(UTC) + timedelta(seconds=14_000)


@pytest.fixture
def all_keyed(postgres_databases: Any) -> Iterator[str]:
    """A table whose every row has a concurrency key, due a second apart, analysed while every row
    was pending; then the rows due by ``KEYED_NOW`` but the last ten fired (finished): what the
    statistics of a fresh table of keyed jobs look like while they fire. They count thousands of
    due pending rows where ten are left, and no row without a key."""
    url = postgres_databases.create("keyed")
    fill = FILL.replace(
        "(ARRAY['completed', 'completed', 'cancelled', 'pending', 'active', 'paused'])[i %% 6 + 1]",
        "'pending'",
    )
    with psycopg.connect(sa.make_url(url).set(drivername="postgresql").render_as_string(False)) as conn:
        conn.execute(fill, {"rows": 20_000})
        conn.execute("UPDATE schedule_jobs SET concurrency_key = 'k', concurrency_limit = 8")
        conn.commit()
        conn.execute("ANALYZE schedule_jobs")
        conn.commit()
        conn.execute(
            "UPDATE schedule_jobs SET status = 'completed' WHERE run_at <= %(now)s - interval '10 seconds'",
            {"now": KEYED_NOW},
        )
        conn.commit()
    yield url
    postgres_databases.drop(url)


def test_the_claim_of_keyed_rows_reads_indexes_only(all_keyed: str) -> None:
    """The statement that claims rows with a key and then the rest (in the transaction of its
    settings and keys, as they are set) never reads the whole table, and updates the rows it
    chose by id: the statistics here would have it read every row, or every pending row."""
    sql = pg_claims.CLAIM_KEYED_FIRST
    params = {"now": KEYED_NOW, "worker": "w", "lease": KEYED_NOW, "limit": 50}
    url = sa.make_url(all_keyed).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(url) as conn:  # one transaction: the settings are local to it
        conn.execute(f"SELECT {pg_claims.CLAIM_SETTINGS}")
        conn.execute("SELECT set_config('schedule_sdk.claim_keys', '{k}', true)")
        [(plan,)] = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchall()
        conn.rollback()
    document = plan if isinstance(plan, list) else json.loads(plan)
    nodes = list(_nodes(document[0]["Plan"]))
    scans = [n for n in nodes if n.get("Relation Name") == "schedule_jobs" and "Scan" in n["Node Type"]]
    assert scans and not [n for n in scans if n["Node Type"] == "Seq Scan"], scans
    updates = [n for n in nodes if n["Node Type"] == "ModifyTable"]
    assert len(updates) == 1
    by_id = [
        n
        for n in _nodes(updates[0])
        if n.get("Relation Name") == "schedule_jobs" and "Scan" in n["Node Type"]
    ]
    assert by_id and all("(id)::text" in n.get("Index Cond", "") for n in by_id), by_id
