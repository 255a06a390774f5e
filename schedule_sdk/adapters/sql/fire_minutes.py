"""The per-minute summary of the fire history (``schedule_fire_minutes``, ``schedule_fire_failures``):
added to in the transaction that writes the entries, purged with them.

- SQLite (no round trips): the batch's counts are added up in Python, then one ``executemany``
  per summary table adds them (the failures table only when a fire failed).
- PostgreSQL, batches of up to :data:`PER_ENTRY_MAX` fires: one statement per entry inserts it
  and adds 1 to its (minute, lateness class) row (a data-modifying CTE), all of them one
  ``executemany`` (pipelined: one round trip); then the failures as on SQLite. A separate statement
  for the counts costs a round trip per batch, which larger batches share: their entries are one
  ``COPY`` and their counts are added as on SQLite, where adding one count per entry would update
  the same few rows once per entry.

On PostgreSQL a summary row stays locked from its update to the commit, so writers adding to the
same row would commit one after another. Rows are therefore spread over :data:`SHARDS` shards, the
writing connection's backend pid modulo :data:`SHARDS` (so concurrent transactions, each on its
own connection, mostly take different rows); readers sum the shards. Unsharded, concurrent
recorders queued on the summary's row lock and the summary cost most of the fire rate it was
recording. SQLite has one writer at a time: shard 0.

Within a shard, rows are locked in one order (class rows by key, then failure rows by key), so
two transactions adding to the same rows cannot deadlock.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from schedule_sdk.adapters.sql.tables import schedule_fire_failures as failures
from schedule_sdk.adapters.sql.tables import schedule_fire_minutes as minutes
from schedule_sdk.adapters.sql.tables import schedule_fires as entries
from schedule_sdk.domain.history import FireOutcome, FireRecord, lateness_class

_CLASS_KEYS, _CLASS_COUNTS = ("minute", "lateness_class"), ("succeeded", "failed", "skipped")
_TOPIC_KEYS, _TOPIC_COUNTS = ("minute", "topic"), ("failed",)
#: PostgreSQL: summary rows of one minute and class (or topic) are spread over this many shards.
SHARDS = 16
#: PostgreSQL: batches up to this size count each entry in its own insert statement.
PER_ENTRY_MAX = 16
#: One fire's counts (succeeded, failed, skipped).
_SUCCEEDED, _FAILED, _SKIPPED = (1, 0, 0), (0, 1, 0), (0, 0, 1)


def _one(fire: FireRecord) -> tuple[int, int, int]:
    """One fire's counts: an unheard fire counts as failed when it failed its attempt
    (``unheard_fails``), else as succeeded (the job moved on); the entries keep its outcome."""
    if fire.outcome is FireOutcome.SKIPPED:
        return _SKIPPED
    return _FAILED if fire.failed else _SUCCEEDED


def minute_of(instant: datetime) -> int:
    """Whole minutes since 1970-01-01 UTC (the summary's ``minute``) of an aware datetime."""
    return int(instant.timestamp() // 60)


def count_classes(fires: Sequence[FireRecord]) -> list[tuple[int, int, int, int, int]]:
    """``(minute, lateness_class, succeeded, failed, skipped)`` of ``fires``, in key order."""
    counts: dict[tuple[int, int], list[int]] = {}
    for fire in fires:
        key = (minute_of(fire.fired_at), lateness_class(fire.lateness_ms))
        row = counts.setdefault(key, [0, 0, 0])
        for i, n in enumerate(_one(fire)):
            row[i] += n
    return [(m, c, row[0], row[1], row[2]) for (m, c), row in sorted(counts.items())]


def count_failures(fires: Sequence[FireRecord]) -> list[tuple[int, str, int]]:
    """``(minute, topic, failed)`` of the failed ``fires``, in key order."""
    counts: dict[tuple[int, str], int] = {}
    for fire in fires:
        if fire.failed:
            key = (minute_of(fire.fired_at), fire.topic)
            counts[key] = counts.get(key, 0) + 1
    return [(m, topic, n) for (m, topic), n in sorted(counts.items())]


@functools.cache
def _upsert(
    table: str, keys: tuple[str, ...], counts: tuple[str, ...], dialect: str, paramstyle: str, shards: int
) -> str:
    """The driver-level ``INSERT ... ON CONFLICT DO UPDATE`` adding ``counts`` to the row of
    ``keys`` in this connection's shard (SQLite 3.24+ and PostgreSQL take the same form)."""
    mark = "?" if paramstyle == "qmark" else "%s"
    columns = (*keys, "shard", *counts)
    shard = f"mod(pg_backend_pid(), {shards})" if dialect == "postgresql" else "0"
    values = [mark for _ in keys] + [shard] + [mark for _ in counts]
    added = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in counts)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(values)}) "
        f"ON CONFLICT ({', '.join(keys)}, shard) DO UPDATE SET {added}"
    )


def _statement(conn: Connection, table: sa.Table, keys: tuple[str, ...], counts: tuple[str, ...]) -> str:
    return _upsert(table.name, keys, counts, conn.dialect.name, str(conn.dialect.paramstyle), SHARDS)


def _add_failures(conn: Connection, fires: Sequence[FireRecord]) -> None:
    if by_topic := count_failures(fires):
        conn.exec_driver_sql(_statement(conn, failures, _TOPIC_KEYS, _TOPIC_COUNTS), by_topic)


def add(conn: Connection, fires: Sequence[FireRecord]) -> None:
    """Add ``fires`` to the summary, in ``conn``'s transaction (SQLite: the entries are written
    apart; PostgreSQL writes both with :func:`write_postgres`)."""
    if fires:
        conn.exec_driver_sql(_statement(conn, minutes, _CLASS_KEYS, _CLASS_COUNTS), count_classes(fires))
        _add_failures(conn, fires)


@functools.cache
def _entry_counted(fields: tuple[str, ...], shards: int) -> str:
    """PostgreSQL: insert one entry (values of ``fields``) and add its counts to its class row."""
    counted = _upsert(minutes.name, _CLASS_KEYS, _CLASS_COUNTS, "postgresql", "format", shards)
    values = ", ".join("%s" for _ in fields)
    return f"WITH counted AS ({counted}) INSERT INTO {entries.name} ({', '.join(fields)}) VALUES ({values})"


def write_postgres(
    conn: Connection, fields: tuple[str, ...], rows: Sequence[tuple[Any, ...]], fires: Sequence[FireRecord]
) -> None:
    """Insert the entries ``rows`` (the driver values of ``fields`` of each of ``fires``) and add
    ``fires`` to the summary: one statement per entry, in (minute, lateness class) order."""
    keyed = sorted((minute_of(f.fired_at), lateness_class(f.lateness_ms), n) for n, f in enumerate(fires))
    params = [(m, c, *_one(fires[n]), *rows[n]) for m, c, n in keyed]
    conn.exec_driver_sql(_entry_counted(fields, SHARDS), params)
    _add_failures(conn, fires)


def purge(conn: Connection, before: datetime, limit: int, *, skip_locked: bool) -> int:
    """Delete up to ``limit`` summary rows of whole minutes before ``before``, oldest first;
    return how many. ``skip_locked`` (PostgreSQL): leave rows another purge is deleting."""
    cutoff = minute_of(before)  # minute m is whole before `before` iff m + 1 <= before / 60
    deleted = 0
    for table, keys in ((minutes, (*_CLASS_KEYS, "shard")), (failures, (*_TOPIC_KEYS, "shard"))):
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
