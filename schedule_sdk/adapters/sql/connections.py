"""The connections of the SQL job store, shared by the store and every capability it composes.

:class:`Connections` holds the engine and what each database needs around it: on SQLite the one
writer connection of the process (its turns on a thread lock), its checkpointer thread and the
purger's engine, which never checkpoints; on PostgreSQL the claims' autocommit pool.
:class:`OneConnection` is the same over one given connection (the asyncio service's).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection, Engine

from schedule_sdk.adapters.sql.checkpoints import Checkpointer
from schedule_sdk.adapters.sql.engine import (
    WRITE,
    application_name_of,
    make_engine,
    pooled_options,
    transaction_pooled,
    translate_errors,
)


def claims_engine(engine: Engine) -> Engine:
    """The claims' autocommit pool; its sessions do not wait for the WAL flush, unless a
    transaction pooler is in front: it forwards no session setting (claims then commit durably)."""
    name = application_name_of(engine)
    if transaction_pooled(engine):
        options = pooled_options("transaction", name)
    else:
        options = pooled_options("none", name)
        options["connect_args"] = {**options.get("connect_args", {}), "options": "-c synchronous_commit=off"}
    return sa.create_engine(
        engine.url,
        pool_size=2,
        max_overflow=4,
        pool_pre_ping=engine.pool._pre_ping,
        isolation_level="AUTOCOMMIT",
        **options,
    )


class Connections:
    """Where the SQL job store's statements run: :meth:`write` (a write transaction), :meth:`read`
    (a read transaction) and :meth:`claiming` (one claim statement)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.is_pg = engine.dialect.name == "postgresql"
        #: SQLite: the purger's engine, which never checkpoints (see :meth:`purger`).
        self.purge_engine: Engine | None = None
        #: SQLite: the one connection of this process's writers (see :meth:`writer`).
        self.writer_conn: Connection | None = None
        self.writer_pid = 0
        # SQLite has one writer at a time. Queue this process's writers on a lock, a prompt hand-off,
        # rather than in SQLite's busy handler, which sleeps longer and longer between tries.
        self.writers: threading.RLock | None = None if self.is_pg else threading.RLock()
        #: SQLite: the writer connection's commits never checkpoint; this thread does (see its module).
        self.checkpoints = None if self.is_pg else Checkpointer(self.checkpoint_wal)
        self.checkpoint_conn: tuple[sqlite3.Connection | None, int] = (None, 0)
        self.write_lock: contextlib.AbstractContextManager[object] = self.writers or contextlib.nullcontext()
        # PostgreSQL: claims are single statements, so they run in autocommit (one round trip, not
        # BEGIN/SET/UPDATE/COMMIT) on a small pool whose sessions do not wait for the WAL flush. A
        # claim need not survive a database crash: a lost claim leaves the row pending, so the
        # occurrence fires again (at least once). Outcomes commit the same way, on the main pool
        # (``outcome_transaction``); every other write waits for the flush.
        self.claims: Engine | None = claims_engine(engine) if self.is_pg else None

    @contextlib.contextmanager
    def write(self, engine: Engine | None = None, *, light: bool = False) -> Iterator[Connection]:
        """A write transaction (on ``engine`` if given): committed when the block ends normally.
        ``light``: it rewrites a row or two (a heartbeat), which alone need no checkpoint soon
        (SQLite: see :class:`~.checkpoints.Checkpointer`)."""
        if self.writers is None or engine is not None:
            with self.write_lock, translate_errors(), (engine or self.engine).connect() as conn:
                conn.execution_options(**{WRITE: True})
                with conn.begin():
                    yield conn
            return
        with self.writers, translate_errors():
            conn = self.writer()
            driver = conn.connection.driver_connection
            assert isinstance(driver, sqlite3.Connection)
            changes = driver.total_changes
            try:
                with conn.begin():
                    yield conn
            except BaseException:
                if conn.invalidated or conn.in_transaction():
                    self.drop_writer()
                raise
            # A commit that changed no row (a claim that found nothing due) wrote nothing to the log.
            if self.checkpoints is not None and driver.total_changes != changes:
                self.checkpoints.committed(light=light)

    def writer(self) -> Connection:
        """SQLite: the one connection of this process's writers, kept open (they take turns on the
        writer lock anyway, so a pool checkout and a new ``Connection`` per write would be spent for
        nothing). A forked child opens its own."""
        if self.writer_conn is None or self.writer_pid != os.getpid():
            conn = self.engine.connect()
            conn.execution_options(**{WRITE: True})
            # Its commits never run a checkpoint (an fsync under the writer lock): the
            # checkpointer's thread does (checkpoints module).
            driver = conn.connection.driver_connection
            assert driver is not None
            driver.execute("PRAGMA wal_autocheckpoint=0")
            self.writer_conn, self.writer_pid = conn, os.getpid()
        return self.writer_conn

    def checkpoint_wal(self) -> None:
        """A ``PASSIVE`` WAL checkpoint (it waits for no writer), on the checkpointer thread's own
        connection (not the pool's: it takes no connection an operation could be waiting for)."""
        conn, pid = self.checkpoint_conn
        if conn is None or pid != os.getpid():
            path = self.engine.url.database or ""
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.checkpoint_conn = (conn, os.getpid())
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def others_version(self) -> int | None:
        """SQLite: ``data_version`` on this process's writer connection, which only other
        connections' commits change; None while a writer holds it longer than a moment (or
        before the first write). A moment: the watcher hears a commit before its writer lets go."""
        if self.writers is None or not self.writers.acquire(timeout=0.05):
            return None
        try:
            conn = self.writer_conn
            if conn is None or self.writer_pid != os.getpid() or conn.in_transaction():
                return None
            driver = conn.connection.driver_connection
            assert isinstance(driver, sqlite3.Connection)
            return int(driver.execute("PRAGMA data_version").fetchone()[0])
        except (sqlite3.Error, exc.SQLAlchemyError):
            return None
        finally:
            self.writers.release()

    def drop_writer(self) -> None:
        conn, self.writer_conn = self.writer_conn, None
        if conn is not None and self.writer_pid == os.getpid():
            with contextlib.suppress(exc.SQLAlchemyError):
                conn.close()

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction."""
        with translate_errors(), self.engine.connect() as conn, conn.begin():
            yield conn

    @contextlib.contextmanager
    def peek(self) -> Iterator[Connection]:
        """A connection for one read statement: in autocommit on PostgreSQL (one round trip, no
        ``BEGIN`` and ``COMMIT`` around it), a read transaction on SQLite."""
        if not self.is_pg:
            with self.read() as conn:
                yield conn
            return
        with translate_errors(), self.engine.connect() as conn:
            yield conn.execution_options(isolation_level="AUTOCOMMIT")

    @contextlib.contextmanager
    def claiming(self) -> Iterator[Connection]:
        """A connection for one claim statement (autocommit on PostgreSQL; a write on SQLite)."""
        if self.claims is None:
            with self.write() as conn:
                yield conn
            return
        with translate_errors(), self.claims.connect() as conn:
            yield conn

    @contextlib.contextmanager
    def lock_writes(self, *, wait: bool = True) -> Iterator[bool]:
        """Hold this process's writer lock (SQLite; nothing to hold on PostgreSQL) for the block;
        yields whether it is held (without ``wait``, False when another thread has it)."""
        if self.writers is None:
            yield True
            return
        taken = self.writers.acquire(blocking=wait)
        try:
            yield taken
        finally:
            if taken:
                self.writers.release()

    def purger(self) -> Engine:
        """SQLite: the purger's engine, made on first use: its connection never checkpoints by itself
        (a batch dirties many pages, and a commit's checkpoint would run under the writer lock)."""
        if self.purge_engine is None:
            url = self.engine.url.render_as_string(hide_password=False)
            self.purge_engine = make_engine(url, pool_size=1, wal_autocheckpoint=0)
        return self.purge_engine

    def close(self) -> None:
        if self.checkpoints is not None:
            self.checkpoints.close()
            conn, pid = self.checkpoint_conn
            if conn is not None and pid == os.getpid():
                conn.close()
        if self.writers is not None:
            with self.writers:
                self.drop_writer()
        if self.claims is not None:
            self.claims.dispose()
        if self.purge_engine is not None:
            self.purge_engine.dispose()
        self.engine.dispose()


class OneConnection(Connections):
    """Every read and write on one given connection (the asyncio service runs the sync code in
    SQLAlchemy's greenlet bridge over an ``AsyncConnection``: the same statements, async I/O)."""

    def __init__(self, conn: Connection, home: Engine) -> None:  # no super().__init__: no engines of its own
        self.engine = home  # the SDK's database (a caller's connection= must reach it)
        self.conn = conn
        self.is_pg = conn.dialect.name == "postgresql"
        self.purge_engine = None
        self.writer_conn = None
        self.writer_pid = 0
        self.writers = None
        self.checkpoints = None
        self.checkpoint_conn = (None, 0)
        self.write_lock = contextlib.nullcontext()  # a thread lock would block the event loop
        self.claims = None

    @contextlib.contextmanager
    def write(self, engine: Engine | None = None, *, light: bool = False) -> Iterator[Connection]:
        with translate_errors():
            self.conn.execution_options(**{WRITE: True})
            with self.conn.begin():
                yield self.conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        with translate_errors():
            self.conn.execution_options(**{WRITE: False})  # a long-lived connection keeps options
            with self.conn.begin():
                yield self.conn

    @contextlib.contextmanager
    def peek(self) -> Iterator[Connection]:
        with self.read() as conn:
            yield conn

    def close(self) -> None:
        return None  # the connection and the engine belong to the caller
