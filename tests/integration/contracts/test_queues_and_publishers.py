"""The ExecutionQueue and EventPublisher contracts (schedule_sdk/testing/contracts/) on every
adapter of the SDK: the inline, sql and rq queues; the local (blinker) and Redis publishers."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from sqlalchemy.util import greenlet_spawn

from schedule_sdk.adapters.publishers.blinker import BlinkerEventPublisher
from schedule_sdk.adapters.publishers.redis import RedisEventPublisher
from schedule_sdk.core.listeners import ListenerRegistry
from schedule_sdk.domain.events import SCHEDULE_MISSED_EVENT, ScheduleMissedEvent
from schedule_sdk.ports import EventPublisher, ExecutionQueue, Occurrence
from schedule_sdk.substrates.inline import InlineExecutionQueue
from schedule_sdk.substrates.rq.async_handoff import AsyncRQHandOff
from schedule_sdk.substrates.rq.queue import RQExecutionQueue
from schedule_sdk.substrates.sql.queue import SQLExecutionQueue
from schedule_sdk.testing.contracts.event_publisher import EventPublisherContract, missed
from schedule_sdk.testing.contracts.execution_queue import ExecutionQueueContract
from tests.support import services
from tests.support.waiting import wait_until

_names = itertools.count()


class _Redis:
    @pytest.fixture(autouse=True)
    def _redis(self, redis_base_url: str) -> None:
        self.redis_url = redis_base_url
        self.name = f"contract_{services.RUN_ID}_{next(_names)}"


class TestInlineQueue(ExecutionQueueContract):
    def open_queue(self) -> ExecutionQueue:
        return InlineExecutionQueue()


class TestSQLQueue(ExecutionQueueContract):
    holds_entries = False  # the job row is the entry

    def open_queue(self) -> ExecutionQueue:
        return SQLExecutionQueue()


@pytest.mark.redis
class TestRQQueue(_Redis, ExecutionQueueContract):
    def open_queue(self) -> ExecutionQueue:
        self.rq = RQExecutionQueue(redis_url=self.redis_url, queue_name=self.name)
        return self.rq

    def close_queue(self) -> None:
        keys = self.rq.connection.keys(f"*{self.name}*")
        if keys:
            self.rq.connection.delete(*keys)
        self.rq.close()


class _Bridged(ExecutionQueue):
    """An asyncio queue called as the awaitable service calls it (each call in SQLAlchemy's greenlet
    bridge, on a loop of its own in a thread), so the sync contract can drive it."""

    def __init__(self, queue: AsyncRQHandOff) -> None:
        self.inner = queue
        self.name = queue.name
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(greenlet_spawn(method, *args), self.loop).result(10)

    def enqueue(self, occurrences: Sequence[Occurrence]) -> None:
        self._call(self.inner.enqueue, occurrences)

    def committed(self, occurrences: Sequence[Occurrence]) -> None:
        self._call(self.inner.committed, occurrences)

    def withdraw(self, occurrences: Sequence[Occurrence]) -> None:
        self._call(self.inner.withdraw, occurrences)

    def missing(self, occurrences: Sequence[Occurrence]) -> list[Occurrence]:
        found: list[Occurrence] = self._call(self.inner.missing, occurrences)
        return found

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.inner.aclose(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.mark.redis
class TestAsyncRQHandOff(_Redis, ExecutionQueueContract):
    """The asyncio hand-off implements the whole port (``missing`` too) with the sync one's rules."""

    def open_queue(self) -> ExecutionQueue:
        self.bridged = _Bridged(AsyncRQHandOff(redis_url=self.redis_url, queue_name=self.name))
        return self.bridged

    def close_queue(self) -> None:
        self.bridged.close()
        rq = RQExecutionQueue(redis_url=self.redis_url, queue_name=self.name)
        keys = rq.connection.keys(f"*{self.name}*")
        if keys:
            rq.connection.delete(*keys)
        rq.close()


class TestBlinkerPublisher(EventPublisherContract):
    def open_publisher(self, registry: ListenerRegistry) -> EventPublisher:
        return BlinkerEventPublisher(registry=registry)


@pytest.mark.redis
class TestRedisPublisher(_Redis, EventPublisherContract):
    def open_publisher(self, registry: ListenerRegistry) -> EventPublisher:
        return RedisEventPublisher(registry=registry, redis_url=self.redis_url, channel=self.name)

    def test_a_missed_event_reaches_other_instances_with_its_reason(self) -> None:
        here, there = ListenerRegistry(), ListenerRegistry()
        received: list[ScheduleMissedEvent] = []
        there.connect(SCHEDULE_MISSED_EVENT, received.append)
        sender = RedisEventPublisher(registry=here, redis_url=self.redis_url, channel=self.name)
        receiver = RedisEventPublisher(registry=there, redis_url=self.redis_url, channel=self.name)
        try:
            assert wait_until(receiver._ready.is_set, 10)
            sent = dataclasses.replace(missed(), reason="overlap")
            sender.publish_missed(sent)
            assert wait_until(lambda: received, 10)
            assert received == [sent] and received[0].reason == "overlap"
        finally:
            sender.close()
            receiver.close()
