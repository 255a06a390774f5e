"""``AsyncRQHandOff``: the ``rq`` substrate's hand-off on ``redis.asyncio``.

The asyncio service runs the sync write path in SQLAlchemy's greenlet bridge; this queue is
called there and awaits ``redis.asyncio`` through the same bridge (``await_only``), so a
hand-off is non-blocking I/O on the app's loop, not a thread hop. It is the hand-off of
:class:`~schedule_sdk.substrates.rq.queue.RQExecutionQueue` (the same rules, keys and scripts:
:class:`~schedule_sdk.substrates.rq.handoff.RedisHandOff`) on an asyncio client: the whole
:class:`~schedule_sdk.ports.ExecutionQueue` port, ``missing`` included. It must be called from
the greenlet bridge. The pump, the fire path and the reconciler use the sync queue.
"""

from __future__ import annotations

from typing import Any

from redis import asyncio as aioredis
from sqlalchemy.util import await_only

from schedule_sdk.substrates.rq.handoff import RedisHandOff


class AsyncRQHandOff(RedisHandOff):
    def __init__(
        self, *, redis_url: str, queue_name: str = "schedule_sdk", stale_after: float = 60.0
    ) -> None:
        client: Any = aioredis.Redis.from_url(redis_url, socket_connect_timeout=5, socket_timeout=5)
        super().__init__(client=client, queue_name=queue_name, stale_after=stale_after)

    def _wait(self, reply: Any) -> Any:
        return await_only(reply)

    async def aclose(self) -> None:
        await self._client.aclose()
