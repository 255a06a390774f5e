"""``ListenerLoop``: the one event loop ``async def`` listeners run on.

Listeners are called on the worker's listener threads (so they are bounded by its concurrency and
a slow one holds only its own thread). An ``async def`` listener's coroutine is submitted from
that thread to one long-lived event loop and the thread waits for it:

- a worker started from async code (``async with worker`` or ``await worker.start_async()``)
  attaches the app's running loop, so app-wide async clients, pools and locks created on it work
  in listeners;
- otherwise the coroutine runs on a loop of the SDK's own, started on first use in a daemon
  thread and kept until :meth:`ListenerLoop.close` (the container closes it at
  ``shutdown_resources``), so resources a listener caches stay usable across fires.

At stop, :meth:`ListenerLoop.abandon` cancels the coroutines still running once the worker's
``stop_timeout`` is over: their threads are freed at once, even if the app's loop is blocked.

A fire with a time limit runs its listeners inside :func:`fire_deadline`: a coroutine still
running at the deadline is cancelled and :class:`~schedule_sdk.errors.ListenerTimedOut` raised
in the waiting thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any

from schedule_sdk.domain.errors import ListenerTimedOut

logger = logging.getLogger(__name__)

_deadline = threading.local()


@contextlib.contextmanager
def fire_deadline(deadline: float, limit_ms: int) -> Iterator[None]:
    """Listeners called in this thread inside the block must be done by ``deadline`` (a
    ``time.monotonic()`` instant; the fire's time limit is ``limit_ms``)."""
    _deadline.value = (deadline, limit_ms)
    try:
        yield
    finally:
        _deadline.value = None


def time_left() -> tuple[float, int] | None:
    """Seconds left before this thread's :func:`fire_deadline` (negative once past) and the
    limit in ms; None outside one."""
    current: tuple[float, int] | None = getattr(_deadline, "value", None)
    if current is None:
        return None
    return current[0] - time.monotonic(), current[1]


class ListenerAbandoned(RuntimeError):
    """An async listener was cancelled because the worker stopped before it finished (the fire's
    claim was released, so the job fires again elsewhere)."""


class ListenerLoop:
    """Runs async listeners' coroutines on the attached app loop or on a loop of its own (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attached: asyncio.AbstractEventLoop | None = None
        self._own: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pending: set[concurrent.futures.Future[Any]] = set()

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run coroutines on ``loop`` (the app's, running) from now on."""
        with self._lock:
            self._attached = loop

    def detach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Stop using ``loop`` (if it is the attached one); later coroutines run on the own loop."""
        with self._lock:
            if self._attached is loop:
                self._attached = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the next coroutine runs on (starting the own loop if needed)."""
        with self._lock:
            attached = self._attached
            if attached is not None and attached.is_running() and not attached.is_closed():
                return attached
            return self._own_loop()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coroutine`` on :attr:`loop` and wait for its result (re-raising its error).

        :raises ListenerAbandoned: :meth:`abandon` cancelled it (the worker stopped).
        :raises ListenerTimedOut: it ran past this thread's :func:`fire_deadline`; it was cancelled.
        """
        loop = self.loop
        if _running_loop() is loop:  # called on the loop's own thread: waiting would deadlock
            with self._lock:
                loop = self._own_loop()
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        with self._lock:
            self._pending.add(future)
        left = time_left()
        try:
            return future.result(timeout=None if left is None else max(0.0, left[0]))
        except concurrent.futures.TimeoutError as late:
            future.cancel()
            assert left is not None
            raise ListenerTimedOut(left[1]) from late
        except concurrent.futures.CancelledError as cancelled:
            raise ListenerAbandoned("the worker stopped before this async listener finished") from cancelled
        finally:
            with self._lock:
                self._pending.discard(future)

    def abandon(self) -> int:
        """Cancel every coroutine still running; return how many. Their waiting threads return at once."""
        with self._lock:
            pending = list(self._pending)
        cancelled = sum(future.cancel() for future in pending)
        if cancelled:
            logger.warning("cancelled %d async listeners still running at stop", cancelled)
        return cancelled

    def close(self) -> None:
        """Abandon what still runs and stop the own loop (the attached one is the app's)."""
        self.abandon()
        with self._lock:
            own, thread = self._own, self._thread
            self._own = self._thread = None
            self._attached = None
        if own is not None and thread is not None:
            own.call_soon_threadsafe(own.stop)
            thread.join(timeout=5)
            if not thread.is_alive():
                own.close()

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        """The SDK's own loop, started in a daemon thread on first use (call with the lock held)."""
        if self._own is None:
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            self._thread = threading.Thread(target=serve, name="schedule-sdk-listener-loop", daemon=True)
            self._thread.start()
            ready.wait()
            self._own = loop
        return self._own


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
