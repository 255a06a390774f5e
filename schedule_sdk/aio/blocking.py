"""``BlockingCalls``: a few threads that each run one whole blocking call, awaited with one hop.

SQLite has no non-blocking I/O: its asyncio driver (aiosqlite) is a thread that runs each DB-API
call, so one ``schedule_at`` through SQLAlchemy's asyncio engine makes about eight hops between the
loop and that thread (checkout and reset, ``BEGIN IMMEDIATE``, cursor, ``INSERT``, ``COMMIT``),
each a queue put, a thread wake-up and a loop wake-up. The awaitable
service on SQLite runs the sync service's whole call on one of these threads instead: one hop per
call, and the call queues on the store's in-process writer lock like every other writer of the
process, never in SQLite's sleeping busy handler.

A call keeps running when the coroutine awaiting it is cancelled (as a statement already sent to a
driver does): a cancelled ``schedule_at`` may still have committed. The threads start on first use
and stop at :meth:`close` (the container closes them at ``shutdown_resources``).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)

_Call = tuple["asyncio.Future[Any] | None", Callable[[], Any]]


class BlockingCalls:
    """Runs blocking calls on ``threads`` threads of its own; :meth:`run` awaits one (thread-safe)."""

    def __init__(self, threads: int = 4, *, name: str = "schedule-sdk-store") -> None:
        self._size = threads
        self._name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    async def run(self, call: Callable[[], T]) -> T:
        """``call()`` on one of the threads; its result, or its exception raised here."""
        if not self._threads:
            self._start()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._calls.put((future, call))
        return await future

    def post(self, call: Callable[[], object]) -> None:
        """``call()`` on one of the threads, not awaited (an exception is logged)."""
        if not self._threads:
            self._start()
        self._calls.put((None, call))

    def close(self) -> None:
        """Let the calls already queued finish, then stop the threads."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._calls.put(None)
        for thread in threads:
            thread.join(timeout=30)

    def _start(self) -> None:
        with self._lock:
            while len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._serve, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            future, call = item
            try:
                result = call()
            except BaseException as error:  # handed to the awaiting coroutine, whatever it is
                if future is None:
                    logger.warning("background store call failed: %s", error, exc_info=error)
                else:
                    _settle(future, error=error)
            else:
                if future is not None:
                    _settle(future, result=result)


def _settle(future: asyncio.Future[Any], *, result: Any = None, error: BaseException | None = None) -> None:
    def settle() -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    try:
        future.get_loop().call_soon_threadsafe(settle)
    except RuntimeError:  # the caller's loop is closed: nobody is waiting any more
        pass
