"""The per-minute summary of the fire history (``schedule_fire_minutes``, ``schedule_fire_failures``):
counted in Python per batch of fires and added to the stored counts in the transaction that
writes the entries; purged with them.

On SQLite (no round trips) the entries and each summary table are one ``executemany`` each. On
PostgreSQL the entries and both summaries are written by one statement (:func:`write_postgres`:
data-modifying CTEs over ``unnest`` of one array per column), so a batch of fires costs one round
trip and one statement however many rows it touches.

Rows are added in key order, so two transactions adding to the same minutes (two workers on
PostgreSQL) lock them in the same order and cannot deadlock.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

from ...domain.history import FireOutcome, FireRecord, lateness_class
from .tables import schedule_fire_failures as failures
from .tables import schedule_fire_minutes as minutes
from .tables import schedule_fires as fires_table

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


_CLASS_KEYS, _CLASS_COUNTS = ("minute", "lateness_class"), ("succeeded", "failed", "skipped")
_TOPIC_KEYS, _TOPIC_COUNTS = ("minute", "topic"), ("failed",)


def add(conn: Connection, fires: Sequence[FireRecord]) -> None:
    """Add ``fires`` to the summary, in ``conn``'s transaction (one executemany per table; the
    failures table only when a fire failed). The SQLite path: PostgreSQL uses :func:`write_postgres`."""
    if not fires:
        return
    by_class, by_topic = summarize(fires)
    style = str(conn.dialect.paramstyle)
    conn.exec_driver_sql(_upsert(minutes.name, _CLASS_KEYS, _CLASS_COUNTS, style), by_class)
    if by_topic:
        conn.exec_driver_sql(_upsert(failures.name, _TOPIC_KEYS, _TOPIC_COUNTS, style), by_topic)


def _unnest(table: sa.Table, columns: Sequence[str], dialect: Dialect) -> str:
    """``SELECT * FROM unnest(%s::type[], ...)``: one array parameter per column."""
    arrays = ", ".join(f"%s::{table.c[name].type.compile(dialect)}[]" for name in columns)
    return f"SELECT * FROM unnest({arrays})"


def _add_from_arrays(
    table: sa.Table, keys: tuple[str, ...], counts: tuple[str, ...], dialect: Dialect
) -> str:
    columns = keys + counts
    added = ", ".join(f"{c} = {table.name}.{c} + excluded.{c}" for c in counts)
    return (
        f"INSERT INTO {table.name} ({', '.join(columns)}) {_unnest(table, columns, dialect)} "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {added}"
    )


@functools.cache
def _write_statement(fields: tuple[str, ...], dialect: Dialect) -> str:
    return (
        f"WITH by_class AS ({_add_from_arrays(minutes, _CLASS_KEYS, _CLASS_COUNTS, dialect)}), "
        f"by_topic AS ({_add_from_arrays(failures, _TOPIC_KEYS, _TOPIC_COUNTS, dialect)}) "
        f"INSERT INTO {fires_table.name} ({', '.join(fields)}) {_unnest(fires_table, fields, dialect)}"
    )


def write_postgres(
    conn: Connection, fields: tuple[str, ...], rows: Sequence[tuple[Any, ...]], fires: Sequence[FireRecord]
) -> None:
    """Insert the history entries ``rows`` (driver values of the columns ``fields``) and add
    ``fires`` to the summary, in one statement (PostgreSQL; one text, so the driver prepares it
    once per connection)."""
    by_class, by_topic = summarize(fires)
    params = [list(column) for column in zip(*by_class, strict=True)] or [[]] * len(
        _CLASS_KEYS + _CLASS_COUNTS
    )
    params += [list(column) for column in zip(*by_topic, strict=True)] or [[]] * len(
        _TOPIC_KEYS + _TOPIC_COUNTS
    )
    params += [list(column) for column in zip(*rows, strict=True)]
    conn.exec_driver_sql(_write_statement(fields, conn.dialect), tuple(params))


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
