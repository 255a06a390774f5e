"""Many job rows in one statement (``schedule_many``, the timer arming a batch of timers).

Letting SQLAlchemy build each row's parameters costs more than the database's insert itself, so
the rows go straight to the driver: on PostgreSQL as one ``COPY ... FROM STDIN`` (about three times
the rows per second of an executemany; the notify trigger of migration 0001 fires for each row as
for an ``INSERT``), on SQLite as one executemany of the statement compiled once, each value
through its column type's own bind processor.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...domain.errors import ClientRequestIdInUse, StoreUnavailable
from .engine import translate_errors
from .tables import schedule_jobs as t

_NAMES = [c.name for c in t.c]
_COPY = f"COPY schedule_jobs ({', '.join(_NAMES)}) FROM STDIN"
_USED = re.compile(r"\(client_request_id\)=\((.*)\) already exists")


def insert_rows(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` (column values by name) inside the transaction of ``conn``.

    :raises ClientRequestIdInUse: a row's ``client_request_id`` is used by another row (named
        when the database says which); the transaction must roll back.
    :raises StoreUnavailable: the database failed.
    """
    if conn.dialect.name == "postgresql":
        _copy(conn, rows)
        return
    sql, values_of, binds = _compiled(conn.dialect)
    params = []
    for row in rows:
        values = list(values_of(row))
        for index, bind in binds:
            if values[index] is not None:
                values[index] = bind(values[index])
        params.append(tuple(values))
    try:
        with translate_errors():
            conn.exec_driver_sql(sql, params)
    except ClientRequestIdInUse as error:
        # SQLite undid the failed row only: look up which other row holds one of ours.
        raise ClientRequestIdInUse(_used_request_id(conn, rows) or "?") from error.__cause__


def _copy(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    import psycopg  # the optional ``postgres`` extra: only PostgreSQL stores get here

    driver = conn.connection.driver_connection
    assert isinstance(driver, psycopg.Connection)
    try:
        with driver.cursor() as cursor, cursor.copy(_COPY) as copy:
            for row in rows:
                copy.write_row([row[name] for name in _NAMES])
    except psycopg.errors.UniqueViolation as error:
        used = _USED.search(error.diag.message_detail or "")
        if used is None:
            raise StoreUnavailable(f"the job store rejected a write: {error}") from error
        raise ClientRequestIdInUse(used.group(1)) from error
    except psycopg.Error as error:
        raise StoreUnavailable(f"the job store failed: {type(error).__name__}: {error}") from error


@functools.cache
def _compiled(
    dialect: sa.Dialect,
) -> tuple[str, Callable[[dict[str, Any]], tuple[Any, ...]], list[tuple[int, Callable[[Any], Any]]]]:
    """The positional insert statement, a getter of its values from a row, and the bind processors
    of the columns that have one (by position)."""
    compiled = sa.insert(t).compile(dialect=dialect)
    assert compiled.positional and compiled.positiontup is not None
    names = compiled.positiontup
    binds = [(i, t.c[name].type.bind_processor(dialect)) for i, name in enumerate(names)]
    return compiled.string, operator.itemgetter(*names), [(i, b) for i, b in binds if b is not None]


def _used_request_id(conn: Connection, rows: Sequence[dict[str, Any]]) -> str | None:
    ours = {row["id"] for row in rows}
    wanted = [row["client_request_id"] for row in rows if row["client_request_id"] is not None]
    for start in range(0, len(wanted), 500):
        query = sa.select(t.c.id, t.c.client_request_id).where(
            t.c.client_request_id.in_(wanted[start : start + 500])
        )
        with translate_errors():
            for row_id, used in conn.execute(query):
                if row_id not in ours:
                    return str(used)
    return None
