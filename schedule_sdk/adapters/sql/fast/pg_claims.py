"""PostgreSQL claims as prepared driver statements: the statement every fire starts with.

A claim through SQLAlchemy Core spends CPU per execution (cache lookup, expanding parameters, result
processing) on top of the driver's own; on the fire path that CPU competes for the GIL with the
pump, the consumer and the listeners, and shows up as lateness. So on PostgreSQL both claim
statements are fixed SQL text run on the driver connection (keys travel as arrays, so the text never
changes and psycopg prepares it once per connection), except behind a transaction pooler, where the
engine's connections prepare nothing (``prepare_threshold=None``).

Both choose and lock pending rows inside a materialized CTE (``FOR UPDATE SKIP LOCKED`` evaluated
once, so a batch never claims more than asked; a locked row is re-checked against the condition
before it is chosen) and then update exactly those rows by primary key.

``CLAIM_DUE`` and ``CLAIM_MANY`` claim rows without a concurrency key only. ``CLAIM_DUE`` also
answers, in its last two columns, whether any row with a key is due (through the keyed partial
index, so a store without keyed jobs pays no extra round trip) and the next due instant (what the
poller sleeps until). Rows with a key are claimed in a short transaction: it takes a
transaction-scoped advisory lock per key (in one order, so two claimers never deadlock), and only
then counts the key's active rows and chooses its waiting ones
(:mod:`schedule_sdk.domain.concurrency`): two workers racing for a key's last slot take turns,
and the second one's statement, started after the first committed, sees the slot taken. The
locking statement hands the keys it locked to the claiming one through a transaction-local
setting, so neither waits for the other's result in the client: the whole transaction goes to
the server in one pipeline, one round trip. While rows with a key have been due lately, the store
claims through :func:`claim_keyed_first` alone (the keys' waiting rows, then the rest, with the
same two answers); :func:`claim_keyed` serves ``claim_many``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import exc
from sqlalchemy.engine import Engine

from schedule_sdk.adapters.sql.tables import UTCDateTime
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.domain.errors import StoreUnavailable

_COLUMNS = [c.name for c in t.c]
_UTC_COLUMNS = frozenset(c.name for c in t.c if isinstance(c.type, UTCDateTime))
_SET = "status = 'active', claimed_by = %(worker)s, claimed_until = %(lease)s, updated_at = %(now)s"
_RETURNING = ", ".join(f"s.{name}" for name in _COLUMNS)


def _due_unkeyed(limit: str) -> str:
    """Choose and lock up to ``limit`` (an SQL expression) due pending rows without a key, in due
    order, skipping those another claim holds: every claim of rows without a key chooses so."""
    return f"""
    SELECT id FROM schedule_jobs
    WHERE status = 'pending' AND run_at <= %(now)s AND concurrency_key IS NULL
    ORDER BY run_at LIMIT {limit}
    FOR UPDATE SKIP LOCKED
"""


#: The earliest ``run_at`` after ``now`` of a pending row: what a poller sleeps until (rows due
#: by ``now`` are claimed, held by another claim, or waiting for a slot).
_NEXT_DUE = """(
        SELECT min(run_at) FROM schedule_jobs WHERE status = 'pending' AND run_at > %(now)s
    )"""


#: Bind ``now``, ``worker``, ``lease``, ``limit``. Rows without a key, then two last columns:
#: whether a row with a key is due, and the earliest ``run_at`` after ``now`` of a pending row
#: (the poller's next wake-up: rows due by ``now`` are claimed, skipped as another claim's, or
#: waiting for a slot). One row of NULLs and those two when none was claimed.
CLAIM_DUE = f"""
WITH chosen AS MATERIALIZED ({_due_unkeyed("%(limit)s")}), claimed AS (
    UPDATE schedule_jobs s SET {_SET} FROM chosen WHERE s.id = chosen.id
    RETURNING {_RETURNING}
)
SELECT claimed.*, keyed.due, keyed.next_due FROM (
    SELECT EXISTS (
        SELECT 1 FROM schedule_jobs
        WHERE status = 'pending' AND concurrency_key IS NOT NULL AND run_at <= %(now)s
    ) AS due, {_NEXT_DUE} AS next_due
) keyed LEFT JOIN claimed ON true"""

#: Bind ``now``, ``worker``, ``lease`` and the keys as three arrays ``ids``, ``occurrences``,
#: ``attempts``.
CLAIM_MANY = f"""
WITH chosen AS MATERIALIZED (
    SELECT j.id FROM schedule_jobs j
    JOIN unnest(%(ids)s::varchar[], %(occurrences)s::int[], %(attempts)s::int[]) AS k(id, occurrence, attempt)
      ON j.id = k.id AND j.occurrence = k.occurrence AND j.attempt = k.attempt
    WHERE j.id = ANY(%(ids)s::varchar[]) AND coalesce(j.status, '') = 'pending' AND j.run_at <= %(now)s
      AND j.concurrency_key IS NULL
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE schedule_jobs s SET {_SET} FROM chosen WHERE s.id = chosen.id
RETURNING {_RETURNING}"""


#: Whether a row is still as its claim returned it (the fire path's read of a job claimed ahead of
#: its due instant, once it is due); bind ``id``, ``worker``, ``occurrence``, ``attempt``.
STILL_CLAIMED = """
SELECT 1 FROM schedule_jobs
WHERE id = %(id)s AND status = 'active' AND claimed_by = %(worker)s
  AND occurrence = %(occurrence)s AND attempt = %(attempt)s"""

#: ``STILL_CLAIMED`` of many claims in one statement: bind ``ids``, ``workers``, ``occurrences``,
#: ``attempts`` (arrays, one entry per claim). The 1-based positions of the claims still held.
STILL_CLAIMED_MANY = """
SELECT c.n FROM unnest(%(ids)s::text[], %(workers)s::text[], %(occurrences)s::int[], %(attempts)s::int[])
  WITH ORDINALITY AS c(id, worker, occurrence, attempt, n)
JOIN schedule_jobs j ON j.id = c.id
WHERE j.status = 'active' AND j.claimed_by = c.worker
  AND j.occurrence = c.occurrence AND j.attempt = c.attempt"""

#: The first key of the two-key advisory locks of concurrency keys (the second is the key's
#: ``hashtext``); the two-key space never meets the one-key locks (the purge's).
KEY_LOCK_SPACE = 0x5C4ED

#: Lock every key with a due waiting row, in ``hashtext`` order; bind ``now``, ``space``. The keys.
LOCK_DUE_KEYS = """
SELECT q.key, pg_advisory_xact_lock(%(space)s, hashtext(q.key)) FROM (
    SELECT d.key FROM (
        SELECT DISTINCT concurrency_key AS key FROM schedule_jobs
        WHERE status = 'pending' AND concurrency_key IS NOT NULL AND run_at <= %(now)s
    ) d ORDER BY hashtext(d.key), d.key
) q"""

#: ``LOCK_DUE_KEYS`` for the keys of the given pending rows; bind ``ids``, ``space``.
LOCK_KEYS_OF = """
SELECT q.key, pg_advisory_xact_lock(%(space)s, hashtext(q.key)) FROM (
    SELECT d.key FROM (
        SELECT DISTINCT concurrency_key AS key FROM schedule_jobs
        WHERE id = ANY(%(ids)s::varchar[]) AND coalesce(status, '') = 'pending'
          AND concurrency_key IS NOT NULL
    ) d ORDER BY hashtext(d.key), d.key
) q"""

#: The transaction-local setting through which the locking statement hands the keys it locked
#: to the claiming one (a text array).
_KEYS = "schedule_sdk.claim_keys"
_LOCKED_KEYS = f"current_setting('{_KEYS}')::varchar[]"


def _handing_over(lock: str) -> str:
    """``lock`` (one row per key it locks) made to store the keys in :data:`_KEYS`."""
    return f"SELECT set_config('{_KEYS}', COALESCE(array_agg(l.key), '{{}}')::text, true) FROM ({lock}) l"


#: The locking statements as :func:`claim_keyed` runs them.
LOCK_DUE_KEYS_HANDED = _handing_over(LOCK_DUE_KEYS)
LOCK_KEYS_OF_HANDED = _handing_over(LOCK_KEYS_OF)

_KEYED = """
WITH running AS (
    SELECT concurrency_key AS key, count(*) AS n FROM schedule_jobs
    WHERE status = 'active' AND concurrency_key IS NOT NULL
      AND concurrency_key = ANY({keys})
    GROUP BY concurrency_key
), waiting AS (
    SELECT j.id, j.run_at, j.concurrency_limit AS lim, COALESCE(r.n, 0) AS n,
           row_number() OVER (PARTITION BY j.concurrency_key ORDER BY j.run_at, j.id) AS place
    FROM schedule_jobs j LEFT JOIN running r ON r.key = j.concurrency_key
    WHERE j.status = 'pending' AND j.concurrency_key IS NOT NULL AND j.run_at <= %(now)s
      AND j.concurrency_key = ANY({keys}){given}
), chosen AS MATERIALIZED (
    SELECT id FROM waiting WHERE n + place <= lim ORDER BY run_at, id LIMIT %(limit)s
){claim}"""
# By primary key only: a join with ``chosen`` can be planned as a hash join over every pending
# row, and a plain status test lets the planner read ix_schedule_jobs_pending_due whole (every
# pending row) while statistics undercount pending rows (a fresh table); no index condition
# matches ``coalesce(status, '')`` (as the outcome update, migration 0021).
_KEYED_UPDATE = f"""
UPDATE schedule_jobs s SET {_SET}
WHERE s.id = ANY(ARRAY({{ids}})) AND coalesce(s.status, '') = 'pending'
RETURNING {_RETURNING}"""

#: The room a keyed claim leaves for rows without a key, and the rows it then updates.
_ROOM_LEFT = "greatest(%(limit)s - (SELECT count(*) FROM chosen), 0)"
_BOTH = "SELECT id FROM chosen UNION ALL SELECT id FROM plain"
#: Claim the waiting rows of the keys this transaction locked, then rows without a key in the room
#: left, in one statement; bind ``now``, ``worker``, ``lease``, ``limit``. Two last columns, as
#: ``CLAIM_DUE``'s: whether rows with a key are left waiting (the locked keys' due rows outnumber
#: those chosen), and the next due instant after ``now``.
CLAIM_KEYED_FIRST = _KEYED.format(
    keys=_LOCKED_KEYS,
    given="",
    claim=f""", plain AS MATERIALIZED ({_due_unkeyed(_ROOM_LEFT)}), claimed AS (
{_KEYED_UPDATE.format(ids=_BOTH)}
)
SELECT claimed.*, left_over.due, left_over.next_due FROM (
    SELECT (SELECT count(*) FROM waiting) > (SELECT count(*) FROM chosen) AS due, {_NEXT_DUE} AS next_due
) left_over LEFT JOIN claimed ON true""",
)
#: Claim the waiting rows of the keys this transaction locked among the given occurrences; bind
#: ``now``, ``worker``, ``lease``, ``limit`` and the occurrences as ``ids``, ``occurrences``,
#: ``attempts``.
CLAIM_KEYED_MANY = _KEYED.format(
    keys=_LOCKED_KEYS,
    given="""
      AND j.id = ANY(%(ids)s::varchar[])
      AND (j.id, j.occurrence, j.attempt) IN (
          SELECT * FROM unnest(%(ids)s::varchar[], %(occurrences)s::int[], %(attempts)s::int[]))""",
    claim=_KEYED_UPDATE.format(ids="SELECT id FROM chosen"),
)


@contextlib.contextmanager
def _session(engine: Engine) -> Iterator[Any]:
    """A driver connection of ``engine`` (an autocommit pool), back to the pool afterwards.

    :raises StoreUnavailable: the database failed; nothing was claimed, or the claim is lost
        with the connection (the rows stay pending or their lease expires: they fire again).
    """
    import psycopg  # the optional ``postgres`` extra: only PostgreSQL stores get here

    try:
        connection = engine.raw_connection()  # the pool raises the driver's own errors
    except (exc.SQLAlchemyError, psycopg.Error) as error:
        raise _unavailable(getattr(error, "orig", None) or error) from error
    driver = connection.driver_connection
    assert isinstance(driver, psycopg.Connection)
    try:
        yield driver
    except psycopg.Error as error:
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            connection.invalidate(error)  # do not hand a broken session to the next claim
        raise _unavailable(error) from error
    finally:
        connection.close()  # back to the pool (or discarded, if invalidated)


def _rows(driver: Any, statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with driver.cursor() as cursor:
        cursor.execute(statement, params, prepare=driver.prepare_threshold is not None)
        return list(cursor.fetchall())


def claim(engine: Engine, statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Run one claim ``statement`` on a connection of ``engine``; the claimed rows, with UTC
    datetimes (:raises StoreUnavailable: see :func:`_session`)."""
    with _session(engine) as driver:
        rows = _rows(driver, statement, params)
    return [_mapping(row) for row in rows]


def still_claimed(engine: Engine, params: dict[str, Any]) -> bool:
    """Run ``STILL_CLAIMED`` on a connection of ``engine`` (one round trip, in autocommit: it
    sees every commit made before it started). :raises StoreUnavailable: see :func:`_session`."""
    with _session(engine) as driver:
        return bool(_rows(driver, STILL_CLAIMED, params))


def still_claimed_many(engine: Engine, params: dict[str, Any]) -> set[int]:
    """Run ``STILL_CLAIMED_MANY`` on a connection of ``engine`` (one round trip, in autocommit):
    the 1-based positions of the claims still held. :raises StoreUnavailable: see :func:`_session`."""
    with _session(engine) as driver:
        return {row[0] for row in _rows(driver, STILL_CLAIMED_MANY, params)}


def claim_due(engine: Engine, params: dict[str, Any]) -> tuple[list[dict[str, Any]], bool, datetime | None]:
    """Run ``CLAIM_DUE``: the claimed rows, whether a row with a key is due, and the next due
    instant after ``now`` (UTC), as its last two columns answer them."""
    with _session(engine) as driver:
        rows = _rows(driver, CLAIM_DUE, params)
    keyed_due, next_due = _flags(rows)
    return [_mapping(row[:-2]) for row in rows if row[0] is not None], keyed_due, next_due


def claim_keyed(engine: Engine, lock: str, statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Claim rows with a concurrency key in one transaction: ``lock`` (``LOCK_DUE_KEYS_HANDED``
    or ``LOCK_KEYS_OF_HANDED``) takes the advisory lock of each key (held until the commit) and
    hands the keys to ``statement``, which claims among them. One pipeline: one round trip."""
    with _session(engine) as driver:
        driver_prepares = driver.prepare_threshold is not None
        with driver.pipeline(), driver.cursor() as locking, driver.cursor() as claiming:
            with driver.transaction():
                locking.execute(lock, {**params, "space": KEY_LOCK_SPACE}, prepare=driver_prepares)
                claiming.execute(statement, params, prepare=driver_prepares)
            rows = claiming.fetchall()
    return [_mapping(row) for row in rows]


#: Two settings for the rest of a claim's transaction, which its first statement makes:
#:
#: - no table scans. The planner estimates the due pending rows from the whole table's ``run_at``
#:   statistics, though finished rows are the past and pending ones mostly the future: it expects
#:   thousands due where there are a few, and where every row has a key it expects no row without
#:   one, and then reads the whole table to find none rather than the due entries of
#:   ``ix_schedule_jobs_pending_due``. No claim is ever better served
#:   by reading the whole table;
#: - generic plans: the keyed claim's custom plans (made afresh for each execution's values) cost
#:   more planning than execution; its generic plan reads the same indexes.
CLAIM_SETTINGS = (
    "set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)"
)
#: ``LOCK_DUE_KEYS_HANDED`` that also makes the :data:`CLAIM_SETTINGS`.
LOCK_DUE_KEYS_SET = f"SELECT {CLAIM_SETTINGS}, h.* FROM ({LOCK_DUE_KEYS_HANDED}) h"


def claim_keyed_first(
    engine: Engine, params: dict[str, Any]
) -> tuple[list[dict[str, Any]], bool, datetime | None]:
    """Claim rows with a concurrency key, then rows without one in the room left, in one
    transaction sent as one pipeline (one round trip): ``LOCK_DUE_KEYS_SET``, then
    ``CLAIM_KEYED_FIRST``. The claimed rows, whether rows with a key are left waiting for a slot,
    and the next due instant after ``now`` (UTC).

    The transaction is the pipeline's implicit one (both statements, up to its synchronisation):
    an explicit ``BEGIN`` and ``COMMIT``, and the driver's transaction block (which synchronises
    at its end and then the pipeline again) would cost more round trips. A failed statement aborts it:
    the statement after it is skipped, and the synchronisation rolls it back."""
    with _session(engine) as driver:
        prepares = driver.prepare_threshold is not None
        with driver.pipeline() as pipeline, driver.cursor() as locking, driver.cursor() as claiming:
            locking.execute(LOCK_DUE_KEYS_SET, {**params, "space": KEY_LOCK_SPACE}, prepare=prepares)
            claiming.execute(CLAIM_KEYED_FIRST, params, prepare=prepares)
            pipeline.sync()
            rows = claiming.fetchall()
    still_waiting, next_due = _flags(rows)
    return [_mapping(row[:-2]) for row in rows if row[0] is not None], still_waiting, next_due


def _flags(rows: list[tuple[Any, ...]]) -> tuple[bool, datetime | None]:
    """The last two columns of ``CLAIM_DUE``'s answer: the flag, and the next due instant (UTC)."""
    due = bool(rows and rows[0][-2])
    next_due = rows[0][-1] if rows else None
    return due, next_due.astimezone(UTC) if isinstance(next_due, datetime) else None


def _unavailable(error: BaseException) -> StoreUnavailable:
    return StoreUnavailable(f"the job store failed: {type(error).__name__}: {error}")


def _mapping(row: tuple[Any, ...]) -> dict[str, Any]:
    values = dict(zip(_COLUMNS, row, strict=True))
    for name in _UTC_COLUMNS:
        value = values[name]
        if isinstance(value, datetime):
            values[name] = value.astimezone(UTC)
    return values
