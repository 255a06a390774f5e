"""``SQLiteCalls``: how the awaitable service runs a call on SQLite without waiting on the loop.

SQLite has no non-blocking I/O, and most of a call's cost is Python (validation, SQLAlchemy's
statement and result handling), which runs on the event loop in any design, including
SQLAlchemy's aiosqlite bridge, whose thread runs only the sqlite3 C calls, one hop each. What must
not happen on the loop is a *wait*. So a call runs:

- inline on the loop, on a connection of its own, when nothing can make it wait: the execution
  substrate is ``sql`` (the hand-off after commit is an in-process wake-up, no network), this
  process's writer lock is free (taken without waiting), and the connection has
  ``busy_timeout=0`` (another process holding SQLite's write lock fails the call at once with
  SQLITE_BUSY, before anything is written) and ``wal_autocheckpoint=0`` (its commits never run a
  checkpoint's fsync; a passive checkpoint is posted to a store thread every
  ``checkpoint_every`` inline calls);
- otherwise, and for calls that may be large (``schedule_many``), on one of the store's threads
  (:class:`~schedule_sdk.aio.blocking.BlockingCalls`) through the container's sync service:
  one hop, queued on the writer lock like every other writer in the process.

A call that found SQLite busy inline is retried on a thread: nothing was written (the busy error
comes from ``BEGIN IMMEDIATE``, and the transaction is rolled back).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.engine import Connection

from schedule_sdk.adapters.sql.engine import is_sqlite_busy, make_engine
from schedule_sdk.adapters.sql.store import ConnectionJobStore, SQLAlchemyJobStore
from schedule_sdk.aio.blocking import BlockingCalls
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.domain.errors import StoreUnavailable

T = TypeVar("T")


class SQLiteCalls:
    """Runs the awaitable service's calls on SQLite: inline when nothing can wait, else on a thread."""

    def __init__(
        self,
        *,
        service: ScheduleService,
        store: SQLAlchemyJobStore,
        inline: bool,
        threads: int = 4,
        checkpoint_every: int = 256,
    ) -> None:
        self._service = service
        self._store = store
        self._threads = BlockingCalls(threads)
        self._inline_allowed = inline
        self._checkpoint_every = checkpoint_every
        self._in_use = threading.Lock()  # one inline call at a time (one loop, or several)
        self._conn: Connection | None = None
        self._inline: ScheduleService | None = None
        self._calls = 0

    @property
    def threads(self) -> BlockingCalls:
        """The store threads (for calls that must not run inline)."""
        return self._threads

    async def run(self, call: Callable[[ScheduleService], T], *, inline: bool = True) -> T:
        """``call(service)``, inline if allowed and nothing would wait, else on a store thread."""
        if inline and self._inline_allowed and self._in_use.acquire(blocking=False):
            try:
                with self._store.lock_writes(wait=False) as held:
                    if held:
                        try:
                            return call(self._inline_service())
                        except StoreUnavailable as error:
                            if not is_sqlite_busy(error):
                                self._drop_connection()
                                raise
                        finally:
                            self._count_call()
            finally:
                self._in_use.release()
        return await self._threads.run(lambda: call(self._service))

    def close(self) -> None:
        """Close the inline connection and stop the store threads."""
        with self._in_use:
            self._drop_connection()
        self._threads.close()

    def _inline_service(self) -> ScheduleService:
        if self._inline is None:
            url = self._store.engine.url.render_as_string(hide_password=False)
            engine = make_engine(url, pool_size=1, busy_timeout_ms=0, wal_autocheckpoint=0)
            self._conn = engine.connect()
            self._inline = self._service.with_store(ConnectionJobStore(self._conn, home=self._store.engine))
        return self._inline

    def _drop_connection(self) -> None:
        conn, self._conn, self._inline = self._conn, None, None
        if conn is not None:
            engine = conn.engine
            conn.close()
            engine.dispose()

    def _count_call(self) -> None:
        self._calls += 1
        if self._calls % self._checkpoint_every == 0:
            self._threads.post(self._checkpoint)

    def _checkpoint(self) -> None:
        raw = self._store.engine.raw_connection()  # autocommit: a checkpoint runs outside a transaction
        try:
            raw.cursor().execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            raw.close()
