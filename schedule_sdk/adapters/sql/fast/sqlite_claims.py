"""SQLite claims as driver statements: the poller's claim, run at every due instant.

The claim statements are the store's Core statements, compiled once for SQLite (so their SQL has
one home). Each claim runs the compiled text on the driver connection, inside the transaction the
store began on it, with a plain tuple of parameters, and maps the returned tuples itself. Through
SQLAlchemy an empty claim (two statements: rows without a concurrency key, then those with one)
spent most of its CPU building result metadata for 38 columns and processing parameters, which
this way skips. On the due instant that CPU holds the GIL the listener thread
waits for, and shows up as lateness.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from schedule_sdk.adapters.sql.tables import UTCDateTime
from schedule_sdk.adapters.sql.tables import schedule_jobs as t

_DIALECT = sqlite.dialect()
_TIME = UTCDateTime()
_COLUMNS = tuple(c.name for c in t.c)
_UTC_COLUMNS = tuple(i for i, c in enumerate(t.c) if isinstance(c.type, UTCDateTime))


class DriverClaim:
    """One claim statement (an ``UPDATE ... RETURNING`` of every column) compiled for SQLite."""

    def __init__(self, statement: sa.Update | sa.Select[Any]) -> None:
        compiled = statement.compile(dialect=_DIALECT)
        self.sql = compiled.string
        self._names = tuple(compiled.positiontup or ())
        self._defaults = dict(compiled.params)  # the literal values Core bound (status, offset)
        self._times = frozenset(
            name for name, bind in compiled.binds.items() if isinstance(bind.type, UTCDateTime)
        )

    def parameters(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The positional parameters for ``values`` (bind names to values; datetimes aware)."""
        merged = {**self._defaults, **values}
        for name in self._times:
            value = merged.get(name)
            if isinstance(value, datetime):
                merged[name] = _TIME.process_bind_param(value, _DIALECT)
        return tuple(merged[name] for name in self._names)

    def run(self, conn: Connection, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run it on ``conn``'s driver connection, in its transaction; the claimed rows as column
        mappings (aware UTC). A driver error is raised as SQLAlchemy's (``DBAPIError``), as a
        statement run through ``conn`` would raise it."""
        return [mapping(row) for row in self._execute(conn, values)]

    def _execute(self, conn: Connection, values: Mapping[str, Any]) -> list[Any]:
        driver = conn.connection.driver_connection
        assert isinstance(driver, sqlite3.Connection)
        parameters = self.parameters(values)
        try:
            return driver.execute(self.sql, parameters).fetchall()
        except sqlite3.Error as error:
            raise exc.DBAPIError.instance(self.sql, parameters, error, sqlite3.Error) from error


class DriverPlan(DriverClaim):
    """A ``SELECT`` of one row, a timestamp (``min(run_at)``) and a flag, compiled for SQLite and
    run like a claim."""

    def plan(self, conn: Connection, values: Mapping[str, Any]) -> tuple[datetime | None, bool]:
        """The timestamp (aware UTC; None for NULL) and the flag."""
        rows = self._execute(conn, values)
        value, flag = rows[0] if rows else (None, False)
        parsed = _TIME.process_result_value(value, _DIALECT) if value is not None else None
        return (parsed if isinstance(parsed, datetime) else None), bool(flag)


class DriverProbe(DriverClaim):
    """A ``SELECT`` compiled for SQLite and run like a claim, asked whether it finds a row."""

    def found(self, conn: Connection, values: Mapping[str, Any]) -> bool:
        return bool(self._execute(conn, values))


def mapping(row: Sequence[Any]) -> dict[str, Any]:
    """A returned row as ``from_row`` reads it: datetimes parsed from SQLite's text."""
    values = list(row)
    for index in _UTC_COLUMNS:
        values[index] = _TIME.process_result_value(values[index], _DIALECT)
    return dict(zip(_COLUMNS, values, strict=True))
