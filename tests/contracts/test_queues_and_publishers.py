"""The ExecutionQueue and EventPublisher contracts (schedule_sdk/testing/contracts/) on every
adapter of the SDK: the inline, sql and rq queues; the local (blinker) and Redis publishers."""

from __future__ import annotations

import itertools

import pytest

from schedule_sdk.adapters.publishers.blinker import BlinkerEventPublisher
from schedule_sdk.adapters.publishers.redis import RedisEventPublisher
from schedule_sdk.core.listeners import ListenerRegistry
from schedule_sdk.ports import EventPublisher, ExecutionQueue
from schedule_sdk.substrates.inline import InlineExecutionQueue
from schedule_sdk.substrates.rq.queue import RQExecutionQueue
from schedule_sdk.substrates.sql.queue import SQLExecutionQueue
from schedule_sdk.testing.contracts.event_publisher import EventPublisherContract
from schedule_sdk.testing.contracts.execution_queue import ExecutionQueueContract
from tests.support import services

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


class TestBlinkerPublisher(EventPublisherContract):
    def open_publisher(self, registry: ListenerRegistry) -> EventPublisher:
        return BlinkerEventPublisher(registry=registry)


@pytest.mark.redis
class TestRedisPublisher(_Redis, EventPublisherContract):
    def open_publisher(self, registry: ListenerRegistry) -> EventPublisher:
        return RedisEventPublisher(registry=registry, redis_url=self.redis_url, channel=self.name)
