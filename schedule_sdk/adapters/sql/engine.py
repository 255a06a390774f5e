"""Engines for SQLite and PostgreSQL, and the translation of driver errors.

SQLite: WAL, ``synchronous=NORMAL``, a busy timeout, and pysqlite's own transaction handling
switched off so that write transactions start with ``BEGIN IMMEDIATE`` (two claimers can then
never read the same due rows: the second waits for the first). Read transactions use a plain
deferred ``BEGIN``. Python 3.11's pysqlite has no ``autocommit`` attribute, hence the event hooks.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

from schedule_sdk.domain.errors import ClientRequestIdInUse, InvalidSetting, StoreUnavailable
from schedule_sdk.domain.text import masked_url, shown, without_secret

WRITE = "schedule_sdk_write"
#: The engine's execution option naming what sits between it and PostgreSQL (the
#: ``database_pooler`` setting): ``"none"`` or ``"transaction"``.
POOLER = "schedule_sdk_pooler"
Pooler = Literal["none", "transaction"]
#: The engine's execution option holding its sessions' ``application_name`` (or None).
SESSION_NAME = "schedule_sdk_session_name"
#: PostgreSQL keeps this many bytes of an ``application_name`` (``NAMEDATALEN - 1``).
_NAME_BYTES = 63
_SESSION_PREFIX = "schedule-sdk "


def session_name(worker_id: str) -> str:
    """The ``application_name`` of the PostgreSQL sessions of the process whose worker id is
    ``worker_id``: ``schedule-sdk <worker id>``, shown as is in ``pg_stat_activity``. An id that
    would not fit PostgreSQL's 63 bytes, or that is not printable ASCII, is shortened to a prefix
    and a digest of the whole id, so two ids never share a name by truncation. Peers find a dead
    worker's sessions by this name (:meth:`SQLAlchemyJobStore.release_dead
    <schedule_sdk.adapters.sql.store.SQLAlchemyJobStore.release_dead>`)."""
    name = _SESSION_PREFIX + worker_id
    if len(name) <= _NAME_BYTES and name.isascii() and name.isprintable():
        return name
    digest = hashlib.sha256(worker_id.encode()).hexdigest()[:16]
    printable = "".join(c if c.isascii() and c.isprintable() else "?" for c in worker_id)
    return f"{_SESSION_PREFIX}{printable[: _NAME_BYTES - len(_SESSION_PREFIX) - 17]}~{digest}"


def make_engine(
    url: str,
    *,
    pool_size: int = 10,
    pre_ping: bool = False,
    busy_timeout_ms: int = 30_000,
    echo: bool = False,
    wal_autocheckpoint: int | None = None,
    pooler: Pooler = "none",
    application_name: str | None = None,
) -> Engine:
    """A SQLAlchemy engine for ``url`` (``sqlite:///path`` or ``postgresql+psycopg://...``).

    ``pre_ping`` tests each pooled PostgreSQL connection before use (one more round trip per
    operation). Without it, the first operation after a database restart fails with
    ``StoreUnavailable`` and the pool is renewed, so the next one succeeds. ``pooler`` says what
    sits in front of PostgreSQL (:func:`pooled_options`); the engine carries it for the engines and
    connections made from it (:func:`transaction_pooled`). ``application_name`` names the
    PostgreSQL sessions (:func:`session_name`; a transaction pooler forwards it too).
    """
    try:
        parsed = sa.make_url(url)
    except exc.ArgumentError as error:
        masked, detail = masked_url(url), without_secret(str(error), url)
        raise InvalidSetting(f"invalid database URL {masked!r}: {detail}") from None
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, busy_timeout_ms, echo, wal_autocheckpoint)
    if parsed.get_backend_name() == "postgresql" and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    try:
        return sa.create_engine(
            parsed,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=pre_ping,
            echo=echo,
            **pooled_options(pooler, application_name),
        )
    except (exc.ArgumentError, exc.NoSuchModuleError, ImportError) as error:
        detail = without_secret(str(error), url)
        raise InvalidSetting(f"cannot use database URL {masked_url(url)!r}: {detail}") from None


def _sqlite_engine(url: sa.URL, busy_timeout_ms: int, echo: bool, wal_autocheckpoint: int | None) -> Engine:
    if url.database in (None, "", ":memory:"):
        raise InvalidSetting("in-memory SQLite is not supported: use a file (sqlite:///jobs.db)")
    engine = sa.create_engine(url, echo=echo, connect_args={"check_same_thread": False})
    _configure_sqlite(engine, busy_timeout_ms, wal_autocheckpoint)
    return engine


def pooled_options(pooler: Pooler, application_name: str | None = None) -> dict[str, Any]:
    """``create_engine`` arguments of a PostgreSQL engine behind ``pooler`` whose sessions are
    named ``application_name`` (a startup parameter, which PgBouncer forwards). Behind a
    transaction pooler, consecutive transactions of one client connection may run on different
    server sessions, so nothing may outlive a transaction: psycopg prepares no statement
    (``prepare_threshold=None``, which also overrides an explicit ``prepare=True``), and no session
    setting is sent at connect time."""
    if pooler not in ("none", "transaction"):
        raise InvalidSetting(f"database_pooler must be 'none' or 'transaction', not {shown(pooler)}")
    options: dict[str, Any] = {"execution_options": {POOLER: pooler, SESSION_NAME: application_name}}
    connect_args: dict[str, Any] = {}
    if pooler == "transaction":
        connect_args["prepare_threshold"] = None
    if application_name is not None:
        connect_args["application_name"] = application_name
    if connect_args:
        options["connect_args"] = connect_args
    return options


def application_name_of(engine: Engine) -> str | None:
    """The ``application_name`` of ``engine``'s sessions (see :func:`make_engine`)."""
    name = engine.get_execution_options().get(SESSION_NAME)
    return name if isinstance(name, str) else None


def transaction_pooled(engine: Engine) -> bool:
    """Whether ``engine`` reaches PostgreSQL through a transaction pooler (its ``pooler``)."""
    return bool(engine.get_execution_options().get(POOLER) == "transaction")


def make_async_engine(
    url: str,
    *,
    pool_size: int = 10,
    pre_ping: bool = False,
    pooler: Pooler = "none",
    application_name: str | None = None,
) -> AsyncEngine:
    """The asyncio twin of :func:`make_engine` for the same database: ``sqlite+aiosqlite`` or
    ``postgresql+psycopg_async``, with the same SQLite set-up (WAL, ``BEGIN IMMEDIATE`` writes)."""
    from sqlalchemy.ext.asyncio import create_async_engine

    parsed = sa.make_url(url)
    try:
        if parsed.get_backend_name() == "sqlite":
            if parsed.database in (None, "", ":memory:"):
                raise InvalidSetting("in-memory SQLite is not supported: use a file (sqlite:///jobs.db)")
            engine = create_async_engine(parsed.set(drivername="sqlite+aiosqlite"))
            _configure_sqlite(engine.sync_engine, 30_000)
            return engine
        return create_async_engine(
            parsed.set(drivername="postgresql+psycopg_async"),
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=pre_ping,
            **pooled_options(pooler, application_name),
        )
    except (exc.ArgumentError, exc.NoSuchModuleError, ImportError) as error:
        raise InvalidSetting(f"cannot use database URL {parsed!r} with asyncio: {error}") from error


def _configure_sqlite(engine: Engine, busy_timeout_ms: int, wal_autocheckpoint: int | None = None) -> None:
    pragmas = ["journal_mode=WAL", "synchronous=NORMAL", f"busy_timeout={busy_timeout_ms}"]
    if wal_autocheckpoint is not None:
        pragmas.append(f"wal_autocheckpoint={wal_autocheckpoint}")

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        for pragma in pragmas:
            cursor.execute(f"PRAGMA {pragma}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        statement = "BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE, False) else "BEGIN"
        dbapi = conn.connection.dbapi_connection  # a statement through SQLAlchemy costs more than it
        assert dbapi is not None
        cursor = dbapi.cursor()
        try:
            cursor.execute(statement)
        except sqlite3.Error as error:
            raise exc.DBAPIError.instance(statement, None, error, sqlite3.Error) from error
        finally:
            cursor.close()


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn driver errors into the SDK's typed errors (the driver error becomes ``__cause__``)."""
    try:
        yield
    except exc.IntegrityError as error:
        if "client_request_id" in str(error.orig):
            raise ClientRequestIdInUse(*_client_request_id(error)) from error
        raise StoreUnavailable(f"the job store rejected a write: {error.orig}") from error
    except exc.SQLAlchemyError as error:
        detail = getattr(error, "orig", None) or error
        raise StoreUnavailable(f"the job store failed: {type(detail).__name__}: {detail}") from error


def _client_request_id(error: exc.IntegrityError) -> tuple[str, str | None]:
    """The clashing ``(client_request_id, tenant_id)`` of a one-row insert ("?" when unknown)."""
    params = error.params
    if isinstance(params, dict):
        tenant = params.get("tenant_id")
        return str(params.get("client_request_id", "?")), None if tenant is None else str(tenant)
    return "?", None


def is_sqlite_busy(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is SQLite's SQLITE_BUSY: another connection holds the
    lock it needed (with ``busy_timeout=0``, at once)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, sqlite3.OperationalError) and (getattr(seen, "sqlite_errorcode", 0) & 0xFF) == 5:
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False
