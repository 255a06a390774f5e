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
from redis.asyncio.sentinel import Sentinel
from sqlalchemy.util import await_only

from schedule_sdk.domain.redis_url import sentinel_target
from schedule_sdk.substrates.rq.handoff import RedisHandOff


def connect_async(url: str, *, timeout: float = 5.0) -> Any:
    """:func:`~schedule_sdk.substrates.rq.plumbing.connect` on ``redis.asyncio`` (a
    ``redis+sentinel://`` URL follows the service's primary the same way)."""
    target = sentinel_target(url)
    if target is None:
        return aioredis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    sentinels = Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
        list(target.sentinels), sentinel_kwargs={"socket_connect_timeout": timeout, "socket_timeout": timeout}
    )
    return sentinels.master_for(
        target.service, socket_connect_timeout=timeout, socket_timeout=timeout, **target.server_options()
    )


class AsyncRQHandOff(RedisHandOff):
    def __init__(
        self, *, redis_url: str, queue_name: str = "schedule_sdk", stale_after: float = 60.0
    ) -> None:
        super().__init__(client=connect_async(redis_url), queue_name=queue_name, stale_after=stale_after)

    def _wait(self, reply: Any) -> Any:
        return await_only(reply)

    async def aclose(self) -> None:
        await self._client.aclose()
