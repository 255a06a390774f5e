"""Job rows inserted straight through the driver (``schedule_at``, ``schedule_many``, the timer).

An insert through SQLAlchemy Core costs more CPU than the database's own work for it (statement
cache lookup, per-row parameter processing, execution events), and scheduling is a hot path. So
the rows go to the driver connection of the transaction: one row as one ``INSERT`` (on PostgreSQL,
prepared unless behind a transaction pooler); many rows as one ``COPY ... FROM STDIN`` on
PostgreSQL (about three times the rows
per second of an executemany; the notify trigger of migration 0001 fires for each row as for an
``INSERT``) or one executemany on SQLite. Each value goes through its column type's own bind
processor, and driver errors are translated as everywhere else (:func:`.engine.translate_errors`).
"""

from __future__ import annotations

import contextlib
import functools
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from schedule_sdk.adapters.sql.engine import translate_errors
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.domain.errors import ClientRequestIdInUse

_NAMES = [c.name for c in t.c]
_Bind = Callable[[Any], Any]
_Getter = Callable[[dict[str, Any]], tuple[Any, ...]]


def insert_rows(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` (column values by name) inside the transaction of ``conn``.

    :raises ClientRequestIdInUse: a row's ``client_request_id`` is used by another row; the
        transaction must roll back.
    :raises StoreUnavailable: the database failed.
    """
    if not rows:
        return
    values_of, binds = _binds(conn.dialect)
    params = []
    for row in rows:
        values = list(values_of(row))
        for index, bind in binds:
            if values[index] is not None:
                values[index] = bind(values[index])
        params.append(tuple(values))
    sql = _sql("?" if conn.dialect.paramstyle == "qmark" else "%s")
    copies = _on_psycopg(conn)
    try:
        with _driver_cursor(conn, sql) as cursor:
            if copies:
                _pg_insert(cursor, sql, params)
            elif len(params) == 1:
                cursor.execute(sql, params[0])
            else:
                cursor.executemany(sql, params)
    except ClientRequestIdInUse as error:  # a list of rows does not say which one clashed
        raise ClientRequestIdInUse(*_used_request_id(conn, rows, error)) from error.__cause__


@contextlib.contextmanager
def _driver_cursor(conn: Connection, sql: str) -> Iterator[Any]:
    """A cursor of the PEP 249 connection in the transaction of ``conn`` (under an async engine,
    SQLAlchemy's adapter of the async driver), closed afterwards; a driver error raised in the
    block is translated as everywhere else (``sql`` names the statement in it)."""
    dbapi = conn.connection.dbapi_connection
    assert dbapi is not None
    with translate_errors():
        cursor = dbapi.cursor()
        try:
            yield cursor
        except conn.dialect.loaded_dbapi.Error as error:
            dbapi_error = conn.dialect.loaded_dbapi.Error
            raise exc.DBAPIError.instance(sql, None, error, dbapi_error) from error
        finally:
            cursor.close()


def _on_psycopg(conn: Connection) -> bool:
    """Whether ``conn`` is PostgreSQL through a sync psycopg connection (which can ``COPY``)."""
    if conn.dialect.name != "postgresql":
        return False
    import psycopg  # the optional ``postgres`` extra: only PostgreSQL stores get here

    return isinstance(conn.connection.dbapi_connection, psycopg.Connection)


def _pg_insert(cursor: Any, sql: str, params: list[tuple[Any, ...]]) -> None:
    if len(params) == 1:
        cursor.execute(sql, params[0], prepare=cursor.connection.prepare_threshold is not None)
        return
    _copy(cursor, t.name, _NAMES, params)


def _copy(cursor: Any, table: str, names: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    """``COPY table (names) FROM STDIN`` of ``rows`` (driver values) on a psycopg cursor."""
    with cursor.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN") as copy:
        for values in rows:
            copy.write_row(values)


def copy_rows(conn: Connection, table: str, names: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> bool:
    """Insert ``rows`` (driver values of the columns ``names``) into ``table`` with one ``COPY``
    inside the transaction of ``conn``, where it is PostgreSQL through psycopg; False (nothing
    written) elsewhere, for the caller's own insert. A COPY of a few hundred rows costs about a
    third of the client CPU of an executemany of them.

    :raises StoreUnavailable: the database failed."""
    if not _on_psycopg(conn):
        return False
    with _driver_cursor(conn, f"COPY {table}") as cursor:
        _copy(cursor, table, names, rows)
    return True


@functools.cache
def _sql(placeholder: str) -> str:
    return (
        f"INSERT INTO schedule_jobs ({', '.join(_NAMES)}) VALUES ({', '.join([placeholder] * len(_NAMES))})"
    )


@functools.cache
def _binds(
    dialect: sa.Dialect,
) -> tuple[Callable[[dict[str, Any]], tuple[Any, ...]], list[tuple[int, _Bind]]]:
    """A getter of a row's values in column order, and the bind processors of the columns that
    have one (by position)."""
    binds = [(i, t.c[name].type.bind_processor(dialect)) for i, name in enumerate(_NAMES)]
    return operator.itemgetter(*_NAMES), [(i, bind) for i, bind in binds if bind is not None]


def _used_request_id(
    conn: Connection, rows: Sequence[dict[str, Any]], error: ClientRequestIdInUse
) -> tuple[str, str | None]:
    """The ``(client_request_id, tenant_id)`` of ours that clashed."""
    if len(rows) == 1:
        return str(rows[0]["client_request_id"]), rows[0]["tenant_id"]
    ours = {(row["tenant_id"], row["client_request_id"]) for row in rows if row["client_request_id"]}
    diag = getattr(getattr(error.__cause__, "orig", None), "diag", None)
    detail = getattr(diag, "message_detail", None) or ""
    if "already exists" in detail:  # PostgreSQL names it (and its transaction is aborted: no query)
        for tenant, request_id in ours:
            shown = f"=({request_id})" if tenant is None else f"=({tenant}, {request_id})"
            if shown + " already exists" in detail:
                return str(request_id), tenant
    # SQLite undid the failed row only: look up which other row holds one of ours (per tenant).
    ids = {row["id"] for row in rows}
    wanted = sorted({request_id for _, request_id in ours})
    for start in range(0, len(wanted), 500):
        query = sa.select(t.c.id, t.c.tenant_id, t.c.client_request_id).where(
            t.c.client_request_id.in_(wanted[start : start + 500])
        )
        with translate_errors():
            for row_id, tenant, request_id in conn.execute(query):
                if row_id not in ids and (tenant, request_id) in ours:
                    return str(request_id), tenant
    return error.client_request_id, error.tenant_id
