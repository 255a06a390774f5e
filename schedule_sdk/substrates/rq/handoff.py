"""The ``rq`` substrate's hand-off rules, once, for a sync and an asyncio Redis client
(docs/explanation/write-order.md).

``enqueue`` (inside the SQL transaction) stages each occurrence in one atomic ``MULTI``; a Redis
error raises :class:`QueueUnavailable` so the row rolls back. ``committed`` (after the commit)
moves the staged entries into the delay index (exact millisecond scores) and wakes the pump if
an entry is earlier than its plan. An occurrence due later than ``stale_after`` goes straight
into the delay index (no transaction lasts that long, so it cannot be released before its row
is visible), which saves the second round trip for the common case. ``withdraw`` (the
compensating removal, and cancel) deletes every trace. ``missing`` (for the reconciler) reports
the occurrences with no entry, counting a staged or released mark older than ``stale_after`` as
none (its process died between two steps).

:class:`RedisHandOff` issues every command through :meth:`RedisHandOff._wait`: the sync queue
(:class:`~schedule_sdk.substrates.rq.queue.RQExecutionQueue`) has a ``redis.Redis`` client and
returns the reply as is; the asyncio hand-off
(:class:`~schedule_sdk.substrates.rq.async_handoff.AsyncRQHandOff`) has a ``redis.asyncio``
client and awaits the reply in SQLAlchemy's greenlet bridge. The commands are the same.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.ports import ExecutionQueue, Occurrence
from schedule_sdk.substrates.rq import plumbing
from schedule_sdk.substrates.rq.plumbing import Keys, unavailable_as

logger = logging.getLogger(__name__)

SCRIPT_CHUNK = 500  # occurrences per Lua call (keeps ARGV small)


def now_ms() -> float:
    return time.time() * 1000.0


def ms_of(occurrence: Occurrence) -> float:
    return occurrence.due_at.timestamp() * 1000.0


class RedisHandOff(ExecutionQueue):
    """The write side of the ``rq`` substrate: the whole :class:`ExecutionQueue` port over the
    client ``client`` (sync or asyncio; see the module docstring)."""

    name = "rq"

    def __init__(self, *, client: Any, queue_name: str, stale_after: float) -> None:
        self.queue_name = queue_name
        self.keys = Keys(queue_name)
        #: A staged or released entry older than this many seconds counts as missing (its process
        #: died between two steps); the reconciler then re-enqueues it from the row.
        self.stale_after = stale_after
        self._client = client
        self._activate = client.register_script(plumbing.ACTIVATE)
        self._missing = client.register_script(plumbing.MISSING)

    def _wait(self, reply: Any) -> Any:
        """The reply of a command this client issued (an asyncio client's is awaited)."""
        return reply

    def _far(self, occurrence: Occurrence, now: float) -> bool:
        return ms_of(occurrence) > now + self.stale_after * 1000.0

    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        if not occurrences:
            return
        now = now_ms()
        near: dict[str, float] = {}
        far: dict[str, float] = {}
        for occurrence in occurrences:
            if self._far(occurrence, now):
                far[occurrence.key] = ms_of(occurrence)
            else:
                near[occurrence.key] = now
        with unavailable_as("could not enqueue in Redis"):
            pipe = self._client.pipeline(transaction=True)
            if near:
                pipe.zadd(self.keys.staged, near)
            if far:  # due after any transaction has long ended: straight into the delay index
                pipe.zadd(self.keys.delay, far)
            self._wait(pipe.execute())

    def committed(self, occurrences: Sequence[Occurrence]) -> None:
        now = now_ms()
        try:
            self.activate([(o.key, ms_of(o)) for o in occurrences if not self._far(o, now)])
        except ScheduleError as error:  # the row is committed: the reconciler heals the entry
            logger.warning("could not activate %d entries (%s); reconciler heals", len(occurrences), error)

    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        self.forget([o.key for o in occurrences])

    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        """One script call per ``SCRIPT_CHUNK`` occurrences, answering with the positions of the
        missing ones only (the reconciler asks about every open row)."""
        fresh = repr(now_ms() - self.stale_after * 1000.0)
        keys = [self.keys.delay, self.keys.staged, self.keys.released]
        found: list[Occurrence] = []
        with unavailable_as("could not read the delay index"):
            for start in range(0, len(occurrences), SCRIPT_CHUNK):
                chunk = occurrences[start : start + SCRIPT_CHUNK]
                positions = self._wait(self._missing(keys=keys, args=[fresh, *(o.key for o in chunk)]))
                found += [chunk[int(n) - 1] for n in positions]
        return found

    def activate(self, entries: Sequence[tuple[str, float]]) -> None:
        """Put ``(key, due ms)`` entries in the delay index (waking the pump if earlier)."""
        keys = [self.keys.staged, self.keys.delay, self.keys.next, self.keys.wake]
        with unavailable_as("could not activate entries in Redis"):
            for start in range(0, len(entries), SCRIPT_CHUNK):
                args: list[Any] = []
                for key, due_ms in entries[start : start + SCRIPT_CHUNK]:
                    args += [key, repr(due_ms)]
                self._wait(self._activate(keys=keys, args=args))

    def forget(self, members: Sequence[str]) -> None:
        """Remove every trace of these entries (best effort, never raises)."""
        if not members:
            return
        try:
            pipe = self._client.pipeline(transaction=True)
            for key in (self.keys.staged, self.keys.delay, self.keys.released):
                pipe.zrem(key, *members)
            self._wait(pipe.execute())
        except Exception as error:
            logger.warning("could not withdraw %d entries from Redis: %s", len(members), error)
