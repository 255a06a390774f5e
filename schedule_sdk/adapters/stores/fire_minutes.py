"""The per-minute summary of the fire history (``schedule_fire_minutes``, ``schedule_fire_failures``):
counted in Python per batch of fires and added to the stored counts by one upsert per table, in
the transaction that writes the entries; purged with them.

Rows are written in key order, so two transactions adding to the same minutes (two workers on
PostgreSQL) lock them in the same order and cannot deadlock.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...domain.history import FireOutcome, FireRecord, lateness_class
from .tables import schedule_fire_failures as failures
from .tables import schedule_fire_minutes as minutes

_COLUMN = {FireOutcome.SUCCEEDED: 0, FireOutcome.FAILED: 1, FireOutcome.SKIPPED: 2}


def minute_of(instant: datetime) -> int:
    """Whole minutes since 1970-01-01 UTC (the summary's ``minute``) of an aware datetime."""
    return int(instant.timestamp() // 60)


def summarize(
    fires: Sequence[FireRecord],
) -> tuple[list[tuple[int, int, int, int, int]], list[tuple[int, str, int]]]:
    """The rows to add for ``fires``: ``(minute, lateness_class, succeeded, failed, skipped)`` and
    ``(minute, topic, failed)``, each in key order."""
    counts: dict[tuple[int, int], list[int]] = {}
    failed: dict[tuple[int, str], int] = {}
    for fire in fires:
        minute = minute_of(fire.fired_at)
        key = (minute, lateness_class(fire.lateness_ms))
        row = counts.get(key)
        if row is None:
            row = counts[key] = [0, 0, 0]
        row[_COLUMN[fire.outcome]] += 1
        if fire.outcome is FireOutcome.FAILED:
            failed[minute, fire.topic] = failed.get((minute, fire.topic), 0) + 1
    by_class = [(m, c, row[0], row[1], row[2]) for (m, c), row in sorted(counts.items())]
    by_topic = [(m, topic, n) for (m, topic), n in sorted(failed.items())]
    return by_class, by_topic


@functools.cache
def _upsert(table: str, keys: tuple[str, ...], counts: tuple[str, ...], paramstyle: str) -> str:
    """The driver-level ``INSERT ... ON CONFLICT DO UPDATE`` adding ``counts`` to a summary row
    (SQLite 3.24+ and PostgreSQL take the same text)."""
    mark = "?" if paramstyle == "qmark" else "%s"
    columns = keys + counts
    added = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in counts)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(mark for _ in columns)}) "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {added}"
    )


def add(conn: Connection, fires: Sequence[FireRecord]) -> None:
    """Add ``fires`` to the summary, in ``conn``'s transaction (one executemany per table; the
    failures table only when a fire failed)."""
    if not fires:
        return
    by_class, by_topic = summarize(fires)
    style = str(conn.dialect.paramstyle)
    conn.exec_driver_sql(
        _upsert(minutes.name, ("minute", "lateness_class"), ("succeeded", "failed", "skipped"), style),
        by_class,
    )
    if by_topic:
        conn.exec_driver_sql(_upsert(failures.name, ("minute", "topic"), ("failed",), style), by_topic)


def purge(conn: Connection, before: datetime, limit: int, *, skip_locked: bool) -> int:
    """Delete up to ``limit`` summary rows of whole minutes before ``before``, oldest first;
    return how many. ``skip_locked`` (PostgreSQL): leave rows another purge is deleting."""
    cutoff = minute_of(before)  # minute m is whole before `before` iff m + 1 <= before / 60
    deleted = 0
    for table, keys in ((minutes, ("minute", "lateness_class")), (failures, ("minute", "topic"))):
        if deleted >= limit:
            break
        key = sa.tuple_(*(table.c[k] for k in keys))
        chosen = sa.select(*(table.c[k] for k in keys)).where(table.c.minute < cutoff)
        chosen = chosen.order_by(table.c.minute).limit(limit - deleted)
        if skip_locked:  # PostgreSQL: a CTE, evaluated once (see sqlalchemy._once)
            once = chosen.with_for_update(skip_locked=True).cte()
            chosen = sa.select(*once.c)
        statement = sa.delete(table).where(key.in_(chosen))
        deleted += int(conn.execute(statement).rowcount)
    return deleted
