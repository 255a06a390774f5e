"""The one retry rule of every reconnect loop (the due poller, the rq pump and consumer, outcome
recording, the PostgreSQL listener, the Redis event subscriber, the NATS command consumer).

:class:`Reconnect` is the delay: the first retry after :data:`FIRST` seconds, each next one twice
as late, never more than :data:`CAP` seconds apart; a success starts over. :func:`retrying` (and
:func:`retrying_async`, its twin for a coroutine step) is the loop: run a step until stopped, start
the delay over after each success, and on a retried error log a warning
(``<what>: <error>; retrying in <delay>s``) and wait the delay, ending early on stop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Protocol

FIRST = 0.05  #: seconds before the first retry
CAP = 0.5  #: the longest wait between two retries (a server back answers within it)


class Reconnect:
    """Exponential backoff state for one loop (not thread-safe: one per loop)."""

    def __init__(self, first: float = FIRST, cap: float = CAP) -> None:
        self._first = first
        self._cap = cap
        self._delay = first

    def next(self) -> float:
        """How long to wait before this retry (then double it for the next, up to the cap)."""
        delay = self._delay
        self._delay = min(delay * 2, self._cap)
        return delay

    def reset(self) -> None:
        """The loop succeeded: the next failure waits :data:`FIRST` again."""
        self._delay = self._first


class Stop(Protocol):
    """What ends a loop: a :class:`threading.Event` or an :class:`asyncio.Event`."""

    def is_set(self) -> bool: ...


def retrying(
    step: Callable[[], float | None],
    *,
    stop: threading.Event,
    errors: tuple[type[Exception], ...],
    what: str,
    logger: logging.Logger,
    wait: Callable[[float], object] | None = None,
    backoff: Reconnect | None = None,
    unexpected: tuple[type[Exception], ...] = (),
) -> None:
    """Call ``step`` until ``stop`` is set (checked before every call).

    ``step`` returns how it went:

    - a number: it made progress. The backoff starts over, and a positive number is a pause
      before the next call, waited with ``wait`` (0: call again at once).
    - ``None``: no progress, but no error either (it waited for work itself and found none, or
      is not the one to act): call again at once, the backoff as it was.

    An error of one of the ``errors`` types is logged as a warning (``<what>: <error>; retrying in
    <delay>s``), one of the ``unexpected`` types with its traceback; then ``wait`` waits the next
    backoff delay and ``step`` is called again. Any other error ends the loop (it propagates).

    ``wait`` takes seconds and may return early (a wake-up, or stop); it defaults to
    ``stop.wait``. A step that runs long (a connection held until stop) gets the ``backoff``
    passed in here and resets it itself once connected.
    """
    pause = stop.wait if wait is None else wait
    delays = Reconnect() if backoff is None else backoff
    while not stop.is_set():
        try:
            progress = step()
        except errors as error:
            delay = _failed(delays, logger, what, error)
        except unexpected:
            delay = _crashed(delays, logger, what)
        else:
            if progress is None:
                continue
            delays.reset()
            if progress <= 0:
                continue
            delay = progress
        pause(delay)


async def retrying_async(
    step: Callable[[], Awaitable[float | None]],
    *,
    stop: Stop,
    errors: tuple[type[Exception], ...],
    what: str,
    logger: logging.Logger,
    wait: Callable[[float], Awaitable[object]],
    backoff: Reconnect | None = None,
    unexpected: tuple[type[Exception], ...] = (),
) -> None:
    """:func:`retrying` for a coroutine ``step`` on an event loop; ``wait`` is a coroutine too
    (there is no default: it should end early when ``stop`` is set)."""
    delays = Reconnect() if backoff is None else backoff
    while not stop.is_set():
        try:
            progress = await step()
        except errors as error:
            delay = _failed(delays, logger, what, error)
        except unexpected:
            delay = _crashed(delays, logger, what)
        else:
            if progress is None:
                continue
            delays.reset()
            if progress <= 0:
                continue
            delay = progress
        await wait(delay)


#: The log records of a retry name the loop's own line: the one that called ``retrying``.
_CALLER = 3


def _failed(backoff: Reconnect, logger: logging.Logger, what: str, error: Exception) -> float:
    delay = backoff.next()
    logger.warning("%s: %s; retrying in %.2fs", what, str(error) or repr(error), delay, stacklevel=_CALLER)
    return delay


def _crashed(backoff: Reconnect, logger: logging.Logger, what: str) -> float:
    """Called inside the ``except`` block, so the log record carries the traceback."""
    delay = backoff.next()
    logger.exception("%s: unexpected error; retrying in %.2fs", what, delay, stacklevel=_CALLER)
    return delay
