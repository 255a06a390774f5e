"""A bad RQ entry (one that does not decode, or is not a fire of this queue) is set aside and
counted, alone: the good fires popped with it are handed on at once, not after a lease."""

from __future__ import annotations

import time

import pytest
from rq.job import Job

from schedule_sdk.adapters.metrics import InMemoryMetrics
from schedule_sdk.substrates.rq import RQExecutionQueue

pytestmark = pytest.mark.redis

#: Passes RQ's restore but its call does not decode (not JSON): refused when read.
NOT_A_CALL = {"data": b"\xff\x00 not json", "created_at": "2026-01-01T00:00:00.000000Z"}
#: Fails RQ's restore itself.
UNDECODABLE = {"data": b"x", "created_at": "garbage"}


def test_bad_entries_are_set_aside_and_counted_and_the_good_ones_of_the_pop_are_handed_on(
    rq_settings, harnesses
):
    h = harnesses(rq_settings, metrics="memory")
    queue: RQExecutionQueue = h.container.queue()
    metrics = h.container.metrics()
    assert isinstance(metrics, InMemoryMetrics)
    now = time.time() * 1000
    good: list[str] = []
    for index, bad in enumerate((UNDECODABLE, NOT_A_CALL)):
        member = f"good{index}_1_1"
        queue.activate([(member, now - 10)])
        released, _ = queue.release(now, 10)
        assert released == [member]
        good.append(member)
        bad_id = f"bad{index}"
        queue.connection.hset(Job.key_for(bad_id), mapping=bad)
        queue.connection.rpush(queue.rq_queue.key, bad_id)  # between the good ones
    queue.activate([("good2_1_1", now - 10)])
    queue.release(now, 10)
    good.append("good2_1_1")

    batches = queue.pop_released(10, 1.0)

    assert sorted(m for batch in batches for m in batch.members) == good
    refused = queue.refused()
    assert [r["id"] for r in refused] == ["bad1", "bad0"]  # newest first
    assert "undecodable" in refused[1]["reason"] and refused[1]["fields"]["created_at"] == "garbage"
    assert "not a schedule_sdk fire" in refused[0]["reason"]
    assert metrics.count("schedule.rq.entries.refused") == 2
    assert queue.connection.llen(queue.rq_queue.key) == 0  # nothing left to pop again
