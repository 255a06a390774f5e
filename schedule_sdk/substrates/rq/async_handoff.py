"""``AsyncRQHandOff``: the ``rq`` substrate's write-side hand-off on ``redis.asyncio``.

The asyncio service runs the sync write path in SQLAlchemy's greenlet bridge; this queue is
called there and awaits ``redis.asyncio`` through the same bridge (``await_only``), so a
hand-off is non-blocking I/O on the app's loop, not a thread hop. It does what the write side of
:class:`~schedule_sdk.substrates.rq.queue.RQExecutionQueue` does, on the same keys and
script: stage inside the transaction (or straight into the delay index when due after
``stale_after``), activate after the commit, remove on withdraw. The pump, the fire path and the
reconciler keep using the sync queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis import asyncio as aioredis
from sqlalchemy.util import await_only

from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.ports import ExecutionQueue, Occurrence
from schedule_sdk.substrates.rq import plumbing
from schedule_sdk.substrates.rq.plumbing import Keys, unavailable_as

if TYPE_CHECKING:
    from schedule_sdk.bootstrap.settings import Settings

logger = logging.getLogger(__name__)


def _ms(occurrence: Occurrence) -> float:
    return occurrence.due_at.timestamp() * 1000.0


class AsyncRQHandOff(ExecutionQueue):
    name = "rq"

    @classmethod
    def from_settings(cls, settings: Settings) -> AsyncRQHandOff:
        assert settings.redis_url is not None
        return cls(
            redis_url=settings.redis_url,
            queue_name=settings.rq_queue,
            stale_after=max(60.0, 2 * settings.lease_seconds),
        )

    def __init__(
        self, *, redis_url: str, queue_name: str = "schedule_sdk", stale_after: float = 60.0
    ) -> None:
        self.keys = Keys(queue_name)
        self.stale_after = stale_after
        self._redis: Any = aioredis.Redis.from_url(redis_url, socket_connect_timeout=5, socket_timeout=5)
        self._activate = self._redis.register_script(plumbing.ACTIVATE)

    def _far(self, occurrence: Occurrence, now_ms: float) -> bool:
        return _ms(occurrence) > now_ms + self.stale_after * 1000.0

    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        if not occurrences:
            return
        now = time.time() * 1000.0
        near = {o.key: now for o in occurrences if not self._far(o, now)}
        far = {o.key: _ms(o) for o in occurrences if self._far(o, now)}
        with unavailable_as("could not enqueue in Redis"):
            pipe = self._redis.pipeline(transaction=True)
            if near:
                pipe.zadd(self.keys.staged, near)
            if far:
                pipe.zadd(self.keys.delay, far)
            await_only(pipe.execute())

    def committed(self, occurrences: Sequence[Occurrence]) -> None:
        now = time.time() * 1000.0
        args: list[Any] = []
        for o in occurrences:
            if not self._far(o, now):
                args += [o.key, repr(_ms(o))]
        if not args:
            return
        keys = [self.keys.staged, self.keys.delay, self.keys.next, self.keys.wake]
        try:
            with unavailable_as("could not activate entries in Redis"):
                await_only(self._activate(keys=keys, args=args))
        except ScheduleError as error:  # the row is committed: the reconciler heals the entry
            logger.warning("could not activate %d entries (%s); reconciler heals", len(occurrences), error)

    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        members = [o.key for o in occurrences]
        if not members:
            return
        try:
            pipe = self._redis.pipeline(transaction=True)
            for key in (self.keys.staged, self.keys.delay, self.keys.released):
                pipe.zrem(key, *members)
            await_only(pipe.execute())
        except Exception as error:
            logger.warning("could not withdraw %d entries from Redis: %s", len(members), error)

    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        raise NotImplementedError("the reconciler uses the sync RQExecutionQueue")

    async def aclose(self) -> None:
        await self._redis.aclose()
