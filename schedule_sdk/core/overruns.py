"""``Overruns``: runs a fire that has a time limit on a thread of its own, so the caller gets an
answer at the limit even when a sync listener never returns.

Python cannot stop a thread. A fire with a time limit therefore runs on a helper thread while
the caller (a listener thread of the worker's pool, or a stock ``rq worker``'s job) waits for it
at most the limit (and :data:`GRACE` seconds more, so that an ``async def`` listener, which is
cancelled at the limit itself, reports its own timeout). When the wait ends first, the caller
takes the timeout answer and goes on serving other jobs; the helper is *stuck* until its
listeners return, and what it then answers is dropped. The number of stuck threads is what
the worker reports (its registry row, ``schedule-sdk health``) and counts
(``schedule.listeners.stuck`` / ``schedule.listeners.unstuck``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from schedule_sdk.core.unobserved import NoMetrics
from schedule_sdk.ports import Metrics

logger = logging.getLogger(__name__)

R = TypeVar("R")

#: Seconds the caller waits past the limit before it gives a fire up as stuck: an ``async def``
#: listener is cancelled at the limit and answers within this.
GRACE = 0.1


class _Race(Generic[R]):
    """Who answers first: the helper (its result) or the caller (the timeout)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.decided = False
        self.result: R | None = None
        self.error: BaseException | None = None


class Overruns:
    """Runs limited fires on helper threads and counts the ones left stuck (thread-safe)."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self._metrics = metrics or NoMetrics()
        self._lock = threading.Lock()
        self._stuck: set[str] = set()
        #: Called (from the helper thread) when a stuck helper returns.
        self.on_unstuck: Callable[[], object] = lambda: None

    def stuck(self) -> list[str]:
        """The names of the helper threads still running a fire that timed out."""
        with self._lock:
            return sorted(self._stuck)

    def count(self) -> int:
        """How many helper threads are stuck (what :meth:`stuck` lists)."""
        with self._lock:
            return len(self._stuck)

    def run(self, body: Callable[[], R], seconds: float, timed_out: Callable[[], R], name: str) -> R:
        """``body()`` on a helper thread named ``name`` if it returns (or raises) within
        ``seconds`` (+ :data:`GRACE`); else ``timed_out()``, and the helper counts as stuck until
        ``body`` returns (its result is then dropped)."""
        race: _Race[R] = _Race()
        helper = threading.Thread(target=self._helper, args=(race, body), name=name, daemon=True)
        helper.start()
        if not race.done.wait(seconds + GRACE):
            with self._lock:
                lost = not race.decided
                if lost:
                    race.decided = True
                    self._stuck.add(name)
            if lost:
                self._metrics.increment("schedule.listeners.stuck")
                logger.warning("listener thread %s is stuck past its fire's time limit", name)
                return timed_out()
        if race.error is not None:
            raise race.error
        return race.result  # type: ignore[return-value]

    def _helper(self, race: _Race[R], body: Callable[[], R]) -> None:
        try:
            result: R | None = body()
            error: BaseException | None = None
        except BaseException as raised:  # handed to the caller, or dropped with a late result
            result, error = None, raised
        with self._lock:
            late = race.decided
            race.decided = True
            if late:
                self._stuck.discard(threading.current_thread().name)
            else:
                race.result, race.error = result, error
        if late:
            self._metrics.increment("schedule.listeners.unstuck")
            logger.warning(
                "stuck listener thread %s returned; its late result was dropped",
                threading.current_thread().name,
            )
            self.on_unstuck()
        else:
            race.done.set()
