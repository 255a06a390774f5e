"""PostgreSQL claims as prepared driver statements: the statement every fire starts with.

A claim through SQLAlchemy Core costs about 0.3 ms of CPU per execution (cache lookup, expanding
parameters, result processing) on top of the driver's 0.2 ms; on the fire path that CPU competes
for the GIL with the pump, the consumer and the listeners, and shows up as lateness. So on
PostgreSQL both claim statements are fixed SQL text run on the driver connection (keys travel as
arrays, so the text never changes and psycopg prepares it once per connection), except behind a
transaction pooler, where the engine's connections prepare nothing (``prepare_threshold=None``).

Both choose and lock pending rows inside a materialized CTE (``FOR UPDATE SKIP LOCKED`` evaluated
once, so a batch never claims more than asked; a locked row is re-checked against the condition
before it is chosen) and then update exactly those rows by primary key.

They claim rows without a concurrency key only. ``CLAIM_DUE`` also answers, in its last column,
whether any row with a key is due (through the keyed partial index, so a store without keyed
jobs pays no extra round trip); the store then claims those in a short transaction of its own
(:func:`claim_keyed`): it takes a transaction-scoped advisory lock per key (in one order, so two
claimers never deadlock), and only then counts the key's active rows and chooses its waiting ones
(:mod:`schedule_sdk.domain.concurrency`): two workers racing for a key's last slot take turns,
and the second one's statement, started after the first committed, sees the slot taken. The
locking statement hands the keys it locked to the claiming one through a transaction-local
setting, so neither waits for the other's result in the client: the whole transaction (begin,
lock, claim, commit) goes to the server in one pipeline, one round trip.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import exc
from sqlalchemy.engine import Engine

from schedule_sdk.adapters.stores.tables import UTCDateTime
from schedule_sdk.adapters.stores.tables import schedule_jobs as t
from schedule_sdk.domain.errors import StoreUnavailable

_COLUMNS = [c.name for c in t.c]
_UTC_COLUMNS = frozenset(c.name for c in t.c if isinstance(c.type, UTCDateTime))
_SET = "status = 'active', claimed_by = %(worker)s, claimed_until = %(lease)s, updated_at = %(now)s"
_RETURNING = ", ".join(f"s.{name}" for name in _COLUMNS)

#: Bind ``now``, ``worker``, ``lease``, ``limit``. Rows without a key, then a last column: whether
#: a row with a key is due (one row of NULLs and that flag when none was claimed).
CLAIM_DUE = f"""
WITH chosen AS MATERIALIZED (
    SELECT id FROM schedule_jobs
    WHERE status = 'pending' AND run_at <= %(now)s AND concurrency_key IS NULL
    ORDER BY run_at LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE schedule_jobs s SET {_SET} FROM chosen WHERE s.id = chosen.id
    RETURNING {_RETURNING}
)
SELECT claimed.*, keyed.due FROM (
    SELECT EXISTS (
        SELECT 1 FROM schedule_jobs
        WHERE status = 'pending' AND concurrency_key IS NOT NULL AND run_at <= %(now)s
    ) AS due
) keyed LEFT JOIN claimed ON true"""

#: Bind ``now``, ``worker``, ``lease`` and the keys as three arrays ``ids``, ``occurrences``,
#: ``attempts``.
CLAIM_MANY = f"""
WITH chosen AS MATERIALIZED (
    SELECT j.id FROM schedule_jobs j
    JOIN unnest(%(ids)s::varchar[], %(occurrences)s::int[], %(attempts)s::int[]) AS k(id, occurrence, attempt)
      ON j.id = k.id AND j.occurrence = k.occurrence AND j.attempt = k.attempt
    WHERE j.id = ANY(%(ids)s::varchar[]) AND j.status = 'pending' AND j.run_at <= %(now)s
      AND j.concurrency_key IS NULL
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE schedule_jobs s SET {_SET} FROM chosen WHERE s.id = chosen.id
RETURNING {_RETURNING}"""


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
        WHERE id = ANY(%(ids)s::varchar[]) AND status = 'pending' AND concurrency_key IS NOT NULL
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
)
UPDATE schedule_jobs s SET {set} FROM chosen WHERE s.id = chosen.id AND s.status = 'pending'
RETURNING {returning}"""

#: Claim the waiting rows of the keys this transaction locked; bind ``now``, ``worker``,
#: ``lease``, ``limit``.
CLAIM_KEYED = _KEYED.format(keys=_LOCKED_KEYS, given="", set=_SET, returning=_RETURNING)
#: ``CLAIM_KEYED`` among the given occurrences only; bind ``ids``, ``occurrences``, ``attempts`` too.
CLAIM_KEYED_MANY = _KEYED.format(
    keys=_LOCKED_KEYS,
    given="""
      AND j.id = ANY(%(ids)s::varchar[])
      AND (j.id, j.occurrence, j.attempt) IN (
          SELECT * FROM unnest(%(ids)s::varchar[], %(occurrences)s::int[], %(attempts)s::int[]))""",
    set=_SET,
    returning=_RETURNING,
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


def claim_flagged(
    engine: Engine, statement: str, params: dict[str, Any]
) -> tuple[list[dict[str, Any]], bool]:
    """:func:`claim` of a statement with a last flag column (``CLAIM_DUE``): the claimed rows, and
    the flag."""
    with _session(engine) as driver:
        rows = _rows(driver, statement, params)
    flag = bool(rows and rows[0][-1])
    return [_mapping(row[:-1]) for row in rows if row[0] is not None], flag


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


def _unavailable(error: BaseException) -> StoreUnavailable:
    return StoreUnavailable(f"the job store failed: {type(error).__name__}: {error}")


def _mapping(row: tuple[Any, ...]) -> dict[str, Any]:
    values = dict(zip(_COLUMNS, row, strict=True))
    for name in _UTC_COLUMNS:
        value = values[name]
        if isinstance(value, datetime):
            values[name] = value.astimezone(UTC)
    return values
