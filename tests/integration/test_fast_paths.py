"""Each fast path of the SQL job store (:mod:`schedule_sdk.adapters.sql.fast`) against the plain
SQLAlchemy Core statement it replaces: the same data before, the same rows returned and left after.

Every case starts both runs from the same seeded table; a path that commits (the PostgreSQL claims
run in autocommit) is compared after a reseed, the others inside a transaction rolled back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from schedule_sdk.adapters.sql import schema, statements
from schedule_sdk.adapters.sql.connections import claims_engine
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.fast import bulk, pg_claims, sqlite_claims
from schedule_sdk.adapters.sql.fast.writes import (
    EXTEND_PG,
    FIRE_TIME,
    fire_params,
    insert_fires,
    update_sql,
    update_values,
)
from schedule_sdk.adapters.sql.rows import FIRE_FIELDS, to_row, update_params
from schedule_sdk.adapters.sql.tables import schedule_fires as fires
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.domain.history import FireOutcome
from schedule_sdk.domain.jobs import ConcurrencyLimit, ScheduledJob
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import Guard
from schedule_sdk.testing.contracts.rows import NOW, at, fire, job

WORKER = "w1"
LEASE = at(30)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'fast.db'}"
        made = make_engine(url)
        schema.upgrade(made)
    else:
        made = make_engine(request.getfixturevalue("postgres_databases").create("fast"))
    yield made
    made.dispose()


@pytest.fixture
def pg_engine(postgres_databases: Any) -> Iterator[Engine]:
    """PostgreSQL only: the fast paths SQLite does not have (it runs the Core statement)."""
    made = make_engine(postgres_databases.create("fast"))
    yield made
    made.dispose()


def _seed() -> list[ScheduledJob]:
    """Due, not yet due, active and finished rows; two with a concurrency key (limit 1)."""
    key = ConcurrencyLimit(key="k", limit=1)
    return [
        job(run_at=at(-3), payload={"n": 1}),
        job(run_at=at(-2)),
        job(run_at=at(-1), concurrency=key),
        job(run_at=at(-1) + timedelta(milliseconds=1), concurrency=key),
        job(run_at=at(60)),
        job(status=JobStatus.ACTIVE, run_at=at(-5), claimed_by=WORKER, claimed_until=at(5)),
        job(status=JobStatus.COMPLETED, run_at=at(-9)),
    ]


def _reset(engine: Engine, jobs: list[ScheduledJob]) -> None:
    with engine.begin() as conn:
        conn.execute(sa.delete(fires))
        conn.execute(sa.delete(t))
        if jobs:
            conn.execute(sa.insert(t), [to_row(j) for j in jobs])


def _jobs(conn: Connection) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(sa.select(t).order_by(t.c.id)).mappings()]


def _fires(conn: Connection) -> list[dict[str, Any]]:
    columns = [fires.c[name] for name in FIRE_FIELDS]
    return [dict(r) for r in conn.execute(sa.select(*columns).order_by(*columns[:4])).mappings()]


def _rolled_back(engine: Engine, run: Callable[[Connection], Any], read: Callable[[Connection], Any]) -> Any:
    """What ``run`` returns and what ``read`` then sees, in a transaction rolled back after."""
    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            return run(conn), read(conn)
        finally:
            transaction.rollback()


def _by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: row["id"])


# -- writes ---------------------------------------------------------------------------------------


def test_bulk_insert_rows_equals_a_core_insert(engine: Engine) -> None:
    _reset(engine, [])
    new = [job(run_at=at(n), payload={"n": n}) for n in range(5)]
    rows = [to_row(j) for j in new]
    fast = _rolled_back(engine, lambda conn: bulk.insert_rows(conn, rows), _jobs)
    core = _rolled_back(engine, lambda conn: conn.execute(sa.insert(t), rows) and None, _jobs)
    assert fast == core and len(fast[1]) == 5


def test_the_driver_update_of_outcomes_equals_the_core_update(engine: Engine) -> None:
    seeded = _seed()
    _reset(engine, seeded)
    active = seeded[5]
    done = replace(active, status=JobStatus.COMPLETED, claimed_by=None, claimed_until=None, updated_at=NOW)
    rescheduled = replace(seeded[1], run_at=at(120), updated_at=NOW)
    changes = [
        (done, Guard(frozenset({JobStatus.ACTIVE}), WORKER, active.occurrence)),
        (rescheduled, Guard(frozenset({JobStatus.PENDING}))),
        (rescheduled, Guard(frozenset({JobStatus.PAUSED}))),  # its guard fails: nothing changes
    ]

    def fast(conn: Connection) -> list[int]:
        counts = []
        for changed, guard in changes:
            sql = update_sql(guard.statuses, guard.claimed_by is not None, str(conn.dialect.paramstyle))
            counts.append(conn.exec_driver_sql(sql, update_values(changed, guard, conn.dialect)).rowcount)
        return counts

    def core(conn: Connection) -> list[int]:
        counts = []
        for changed, guard in changes:
            statement = statements.update_statement(guard.statuses, guard.claimed_by is not None)
            counts.append(conn.execute(statement, update_params(changed, guard)).rowcount)
        return counts

    assert _rolled_back(engine, fast, _jobs) == _rolled_back(engine, core, _jobs)
    assert _rolled_back(engine, fast, _jobs)[0] == [1, 1, 0]


def test_the_driver_insert_of_fire_entries_equals_a_core_insert(engine: Engine) -> None:
    _reset(engine, [])
    records = [fire(n) for n in range(3)] + [
        fire(n + 0.5, outcome=FireOutcome.FAILED, error="boom", attempt=2) for n in range(3)
    ]

    def fast(conn: Connection) -> None:
        params = [fire_params(r, conn.dialect) for r in records]
        if not bulk.copy_rows(conn, fires.name, FIRE_FIELDS, params):
            conn.exec_driver_sql(insert_fires(str(conn.dialect.paramstyle)), params)

    def core(conn: Connection) -> None:
        values = [{name: getattr(r, name) for name in FIRE_FIELDS} for r in records]
        for value in values:
            value["outcome"] = value["outcome"].value
        conn.execute(sa.insert(fires), values)

    fast_seen, core_seen = _rolled_back(engine, fast, _fires), _rolled_back(engine, core, _fires)
    assert fast_seen == core_seen and len(fast_seen[1]) == len(records)


def test_the_driver_insert_of_fire_entries_equals_a_core_insert_without_copy(engine: Engine) -> None:
    """The executemany path, on PostgreSQL too (where a batch goes through ``COPY``)."""
    _reset(engine, [])
    records = [fire(n, job_id=f"j{n}") for n in range(3)]

    def fast(conn: Connection) -> None:
        params = [fire_params(r, conn.dialect) for r in records]
        conn.exec_driver_sql(insert_fires(str(conn.dialect.paramstyle)), params)

    def core(conn: Connection) -> None:
        values = [
            {name: getattr(r, name) for name in FIRE_FIELDS} | {"outcome": r.outcome.value} for r in records
        ]
        conn.execute(sa.insert(fires), values)

    assert _rolled_back(engine, fast, _fires) == _rolled_back(engine, core, _fires)


@pytest.mark.postgres
def test_the_postgres_lease_renewal_equals_the_core_update(pg_engine: Engine) -> None:
    engine = pg_engine
    seeded = _seed()
    _reset(engine, seeded)
    held = [seeded[5].id, seeded[0].id]  # the second is pending: not renewed
    until = at(90)

    def fast(conn: Connection) -> None:
        conn.exec_driver_sql(EXTEND_PG, (WORKER, held, FIRE_TIME.process_bind_param(until, conn.dialect)))

    def core(conn: Connection) -> None:
        conn.execute(
            sa.update(t)
            .where(t.c.claimed_by == WORKER, t.c.status == "active", t.c.id.in_(held))
            .values(claimed_until=until)
        )

    assert _rolled_back(engine, fast, _jobs) == _rolled_back(engine, core, _jobs)


# -- claims ---------------------------------------------------------------------------------------


def _claim_params(limit: int) -> dict[str, Any]:
    return {"c_now": NOW, "c_worker": WORKER, "c_lease": LEASE, "c_limit": limit}


def _pg_params(limit: int) -> dict[str, Any]:
    return {"now": NOW, "worker": WORKER, "lease": LEASE, "limit": limit}


def claims(engine: Engine) -> Engine:
    """The store's claims pool (autocommit sessions) on ``engine``'s database, disposed at exit."""
    pool = claims_engine(engine)
    _opened.append(pool)
    return pool


_opened: list[Engine] = []


@pytest.fixture(autouse=True)
def _dispose_claim_pools() -> Iterator[None]:
    yield
    while _opened:
        _opened.pop().dispose()


def _compare_committed(
    engine: Engine,
    fast: Callable[[], Any],
    core: Callable[[Connection], Any],
    seeded: list[ScheduledJob] | None = None,
) -> tuple[Any, Any]:
    """``fast`` (which commits by itself) and ``core`` (in a committed transaction), each from the
    same seed: what each returned and the rows each left."""
    seeded = seeded or _seed()
    _reset(engine, seeded)
    fast_result = fast()
    with engine.connect() as conn:
        fast_left = _jobs(conn)
    _reset(engine, seeded)
    with engine.begin() as conn:
        core_result = core(conn)
    with engine.connect() as conn:
        core_left = _jobs(conn)
    assert fast_left == core_left
    return fast_result, core_result


@pytest.mark.parametrize("limit", [1, 10])
def test_the_due_claim_equals_the_core_claim(engine: Engine, limit: int) -> None:
    """Rows without a key only (the keyed ones are claimed apart), up to ``limit``, due order."""
    if engine.dialect.name == "postgresql":
        fast, core = _compare_committed(
            engine,
            lambda: pg_claims.claim_due(claims(engine), _pg_params(limit)),
            lambda conn: (
                conn.execute(statements.CLAIM_DUE, _claim_params(limit)).mappings().all(),
                conn.execute(statements.NEXT_PLAN, {"n_now": NOW}).one(),
            ),
        )
        rows, keyed_due, _ = fast
        core_rows, (_, core_keyed_due) = core
        assert _by_id(rows) == _by_id([dict(r) for r in core_rows])
        assert keyed_due == bool(core_keyed_due)
        return
    claim = sqlite_claims.DriverClaim(statements.CLAIM_DUE)
    plan = sqlite_claims.DriverPlan(statements.NEXT_PLAN)
    _reset(engine, _seed())

    def fast_claim(conn: Connection) -> Any:
        return _by_id(claim.run(conn, _claim_params(limit))), plan.plan(conn, {"n_now": NOW})

    def core_claim(conn: Connection) -> Any:
        rows = [dict(r) for r in conn.execute(statements.CLAIM_DUE, _claim_params(limit)).mappings()]
        next_due, keyed = conn.execute(statements.NEXT_PLAN, {"n_now": NOW}).one()
        return _by_id(rows), (next_due, bool(keyed))

    fast_seen = _rolled_back(engine, fast_claim, _jobs)
    assert fast_seen == _rolled_back(engine, core_claim, _jobs)
    assert len(fast_seen[0][0]) == min(limit, 2)


def test_the_keyed_claim_equals_the_core_claim(engine: Engine) -> None:
    """Rows with a key, within the key's limit (one of the two), then the rest."""
    if engine.dialect.name == "postgresql":
        fast, core = _compare_committed(
            engine,
            lambda: pg_claims.claim_keyed_first(claims(engine), _pg_params(10))[0],
            lambda conn: (
                [dict(r) for r in conn.execute(statements.CLAIM_KEYED, _claim_params(10)).mappings()]
                + [dict(r) for r in conn.execute(statements.CLAIM_DUE, _claim_params(9)).mappings()]
            ),
        )
        assert _by_id(fast) == _by_id(core) and len(fast) == 3
        return
    claim = sqlite_claims.DriverClaim(statements.CLAIM_KEYED)
    _reset(engine, _seed())
    fast_seen = _rolled_back(engine, lambda conn: _by_id(claim.run(conn, _claim_params(10))), _jobs)
    core_seen = _rolled_back(
        engine,
        lambda conn: _by_id(
            [dict(r) for r in conn.execute(statements.CLAIM_KEYED, _claim_params(10)).mappings()]
        ),
        _jobs,
    )
    assert fast_seen == core_seen and len(fast_seen[0]) == 1


@pytest.mark.postgres
def test_the_postgres_claim_of_given_occurrences_equals_the_core_claim(pg_engine: Engine) -> None:
    engine = pg_engine
    seeded = _seed()
    given = [seeded[0], seeded[1], seeded[4], seeded[2]]  # due, due, not yet due, keyed
    keys = [(j.id, j.occurrence, j.attempt) for j in given]
    params = _pg_params(len(keys)) | {
        "ids": [k[0] for k in keys],
        "occurrences": [k[1] for k in keys],
        "attempts": [k[2] for k in keys],
    }
    fast, core = _compare_committed(
        engine,
        lambda: pg_claims.claim(claims(engine), pg_claims.CLAIM_MANY, params),
        lambda conn: [
            dict(r)
            for r in conn.execute(
                statements.CLAIM_MANY, _claim_params(len(keys)) | {"c_ids": params["ids"], "c_keys": keys}
            ).mappings()
        ],
        seeded,
    )
    assert _by_id(fast) == _by_id(core) and len(fast) == 2
