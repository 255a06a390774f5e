"""PostgreSQL claims as prepared driver statements: the statement every fire starts with.

A claim through SQLAlchemy Core costs about 0.3 ms of CPU per execution (cache lookup, expanding
parameters, result processing) on top of the driver's 0.2 ms; on the fire path that CPU competes
for the GIL with the pump, the consumer and the listeners, and shows up as lateness. So on
PostgreSQL both claim statements are fixed SQL text run on the driver connection (keys travel as
arrays, so the text never changes and psycopg prepares it once per connection).

Both choose and lock pending rows inside a materialized CTE (``FOR UPDATE SKIP LOCKED`` evaluated
once, so a batch never claims more than asked; a locked row is re-checked against the condition
before it is chosen) and then update exactly those rows by primary key.
"""

from __future__ import annotations

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

#: Bind ``now``, ``worker``, ``lease``, ``limit``.
CLAIM_DUE = f"""
WITH chosen AS MATERIALIZED (
    SELECT id FROM schedule_jobs
    WHERE status = 'pending' AND run_at <= %(now)s
    ORDER BY run_at LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE schedule_jobs s SET {_SET} FROM chosen WHERE s.id = chosen.id
RETURNING {_RETURNING}"""

#: Bind ``now``, ``worker``, ``lease`` and the keys as three arrays ``ids``, ``occurrences``,
#: ``attempts``.
CLAIM_MANY = f"""
WITH chosen AS MATERIALIZED (
    SELECT j.id FROM schedule_jobs j
    JOIN unnest(%(ids)s::varchar[], %(occurrences)s::int[], %(attempts)s::int[]) AS k(id, occurrence, attempt)
      ON j.id = k.id AND j.occurrence = k.occurrence AND j.attempt = k.attempt
    WHERE j.id = ANY(%(ids)s::varchar[]) AND j.status = 'pending' AND j.run_at <= %(now)s
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE schedule_jobs s SET {_SET} FROM chosen WHERE s.id = chosen.id
RETURNING {_RETURNING}"""


def claim(engine: Engine, statement: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Run one claim ``statement`` on a connection of ``engine`` (an autocommit pool); the claimed
    rows, with UTC datetimes.

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
        with driver.cursor() as cursor:
            cursor.execute(statement, params, prepare=True)
            rows = cursor.fetchall()
    except psycopg.Error as error:
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            connection.invalidate(error)  # do not hand a broken session to the next claim
        raise _unavailable(error) from error
    finally:
        connection.close()  # back to the pool (or discarded, if invalidated)
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
