"""The SQL store's per-minute summary of the fire history (schedule_fire_minutes,
schedule_fire_failures; migration 0010) on SQLite and PostgreSQL: it counts exactly what
``record_fires`` wrote, rolls back with it, is purged with it, and the migration fills it from
the history stored before."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from alembic import command

from schedule_sdk.adapters.sql import fire_minutes, schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.fire_minutes import PER_ENTRY_MAX
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.adapters.sql.tables import schedule_fire_failures, schedule_fire_minutes, schedule_fires
from schedule_sdk.domain.history import LATENESS_BOUNDS, FireOutcome, FireRecord
from schedule_sdk.ports import FireHistory, require
from schedule_sdk.testing.contracts.rows import NOW, fire, record

#: (outcome, error): an unheard fire counts as succeeded, or as failed when it failed its attempt;
#: a timed-out one as failed.
OUTCOMES = [(FireOutcome.SUCCEEDED, None)] * 6 + [
    (FireOutcome.FAILED, "RuntimeError: boom"),
    (FireOutcome.SKIPPED, None),
    (FireOutcome.UNHEARD, None),
    (FireOutcome.UNHEARD, "UnheardFire: no listener heard topic 'topic.1'"),
    (FireOutcome.TIMEOUT, "ListenerTimedOut: listeners ran past the fire's time limit of 5 ms"),
]
#: The summary's count columns.
COLUMNS = ("succeeded", "failed", "skipped")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(
    request: pytest.FixtureRequest, database_url_factory: Callable[[str], str]
) -> Iterator[SQLAlchemyJobStore]:
    engine = make_engine(database_url_factory(request.param), pool_size=2)
    schema.upgrade(engine)
    opened = SQLAlchemyJobStore(engine)
    yield opened
    opened.close()


def random_fires(n: int, seed: int = 7, minutes: int = 40) -> list[FireRecord]:
    """Fires over ``minutes`` before ``NOW``, of 3 topics, with lateness across every class
    (bounds, one past a bound, negative) and some failed and skipped."""
    rng = random.Random(seed)
    lateness = [*LATENESS_BOUNDS, *(b + 1 for b in LATENESS_BOUNDS), 0, -3, 7_200_000]
    fires = []
    for i in range(n):
        outcome, error = rng.choice(OUTCOMES)
        fires.append(
            fire(
                seconds=-rng.uniform(0, 60 * minutes),
                lateness_ms=rng.choice(lateness),
                outcome=outcome,
                error=error,
                topic=f"topic.{rng.randrange(3)}",
                occurrence=i,
            )
        )
    return fires


def expected(fires: list[FireRecord]) -> tuple[Counter[tuple[int, int, str]], Counter[tuple[int, str]]]:
    """The summary, counted the plain way: (minute, class, outcome) and (minute, topic) of failures."""
    by_class: Counter[tuple[int, int, str]] = Counter()
    failed: Counter[tuple[int, str]] = Counter()
    for f in fires:
        minute = int(f.fired_at.timestamp()) // 60
        cls = next(
            (i for i, bound in enumerate(LATENESS_BOUNDS) if f.lateness_ms <= bound), len(LATENESS_BOUNDS)
        )
        column = "skipped" if f.outcome is FireOutcome.SKIPPED else "failed" if f.failed else "succeeded"
        by_class[minute, cls, column] += 1
        if column == "failed":
            failed[minute, f.topic] += 1
    return by_class, failed


def stored(store: SQLAlchemyJobStore) -> tuple[Counter[tuple[int, int, str]], Counter[tuple[int, str]]]:
    by_class: Counter[tuple[int, int, str]] = Counter()
    failed: Counter[tuple[int, str]] = Counter()
    with store.engine.connect() as conn:
        for row in conn.execute(sa.select(schedule_fire_minutes)).mappings():
            for column in COLUMNS:
                if row[column]:
                    by_class[row["minute"], row["lateness_class"], column] += row[column]
        for row in conn.execute(sa.select(schedule_fire_failures)).mappings():
            failed[row["minute"], row["topic"]] += row["failed"]
    return by_class, failed


def test_the_summary_counts_every_recorded_fire_by_minute_lateness_class_and_outcome(store):
    fires = random_fires(600)
    start = 0
    for size in itertools.cycle((1, 5, PER_ENTRY_MAX, PER_ENTRY_MAX + 1, 37)):  # both ways of writing
        if start >= len(fires):
            break
        record(store, *fires[start : start + size])  # many transactions adding to the same minutes
        start += size
    assert stored(store) == expected(fires)
    assert sum(stored(store)[0].values()) == 600


def test_the_summary_rolls_back_with_the_entries(store):
    record(store, fire(outcome=FireOutcome.FAILED))
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.record_fires(random_fires(20))
        raise RuntimeError("abort")
    assert stored(store) == expected([fire(outcome=FireOutcome.FAILED)])


def test_purge_history_deletes_the_summary_of_whole_minutes_before_the_cutoff_only(store):
    fires = random_fires(300)
    record(store, *fires)
    cutoff = NOW - timedelta(minutes=20, seconds=30)  # in the middle of a minute
    while require(store, FireHistory, "the test").purge_history(cutoff, 50) == 50:
        pass
    first_kept = int(cutoff.timestamp()) // 60  # the minute holding the cutoff is not whole before it
    by_class, failed = expected([f for f in fires if int(f.fired_at.timestamp()) // 60 >= first_kept])
    assert stored(store) == (by_class, failed)
    assert all(
        f.fired_at >= cutoff for f in require(store, FireHistory, "the test").history(fires[0].job_id, 1000)
    )


def test_the_migration_fills_the_summary_from_the_history_stored_before_it(store):
    config = schema._config()
    with store.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0009")
    # no unheard fires before 0013, no timed-out ones before 0018
    later = (FireOutcome.UNHEARD, FireOutcome.TIMEOUT)
    fires = [f for f in random_fires(400, seed=11) if f.outcome not in later]
    with store.engine.begin() as conn:  # written as before 0010: entries only
        conn.execute(sa.insert(schedule_fires), [entry(f) for f in fires])
    schema.upgrade(store.engine)
    assert stored(store) == expected(fires)


def entry(f: FireRecord) -> dict[str, object]:
    """The ``schedule_fires`` row of ``f`` (a Core insert, not ``record_fires``), without the
    columns of migrations after 0009 (``traceback``: 0014)."""
    values = {c.name: getattr(f, c.name) for c in schedule_fires.c if c.name not in ("id", "traceback")}
    values["outcome"] = f.outcome.value
    return values


@pytest.mark.parametrize("shards", [1, fire_minutes.SHARDS], ids=["one shard", "sharded"])
def test_workers_adding_to_the_same_minutes_at_once_neither_deadlock_nor_lose_counts(
    store, shards: int, monkeypatch: pytest.MonkeyPatch
):
    """Four threads (four workers' recorders) add batches to the same few minutes, rows and
    topics in every order; each batch its own transaction. With one shard they all want the
    same rows (this fails when rows are not taken in one order: deadlocks)."""
    monkeypatch.setattr(fire_minutes, "SHARDS", shards)
    sizes = [40 if n % 4 == 3 else 12 for n in range(96)]  # both ways of writing
    batches = [random_fires(size, seed=100 + n, minutes=2) for n, size in enumerate(sizes)]
    errors: list[BaseException] = []

    def work(mine: list[list[FireRecord]]) -> None:
        try:
            for batch in mine:
                with store.transaction() as tx:
                    tx.record_fires(batch)
                    time.sleep(0.002)  # holding the summary rows a while, as a commit does
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(batches[n::4],)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert stored(store) == expected([f for batch in batches for f in batch])
