"""The DelayIndex contract (schedule_sdk/testing/contracts/delay_index.py) on the rq substrate's
Redis binding, each test on queue names of its own (prefixed with this run's id)."""

from __future__ import annotations

import itertools

import pytest

from schedule_sdk.ports import DelayIndex
from schedule_sdk.substrates.rq.queue import RQExecutionQueue
from schedule_sdk.testing.contracts.delay_index import DelayIndexContract
from tests.support import services

pytestmark = pytest.mark.redis

_names = itertools.count()


class TestRQDelayIndex(DelayIndexContract):
    @pytest.fixture(autouse=True)
    def _redis(self, redis_base_url: str) -> None:
        self.redis_url = redis_base_url
        self.name = f"delay_{services.RUN_ID}_{next(_names)}"

    def open_index(self) -> DelayIndex:
        self.rq = RQExecutionQueue(redis_url=self.redis_url, queue_name=self.name)
        return self.rq

    def close_index(self) -> None:
        keys = self.rq.connection.keys(f"*{self.name}*")
        if keys:
            self.rq.connection.delete(*keys)
        self.rq.close()
