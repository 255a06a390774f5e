"""``Reconnect``: the one retry delay of every reconnect loop (the due poller, the rq pump and
consumer, outcome recording, the PostgreSQL listener, the Redis event subscriber, the NATS command
consumer): the first retry after :data:`FIRST` seconds, each next one twice as late, never more
than :data:`CAP` seconds apart; a success starts over."""

from __future__ import annotations

FIRST = 0.05  #: seconds before the first retry
CAP = 2.0  #: the longest wait between two retries


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
