"""The pump releases entries a few ms before their due instant; each RQ job carries that instant
and is held until it, and nothing fires early."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from rq.job import Job
from rq.serializers import JSONSerializer

from schedule_sdk import OneShotSpec
from schedule_sdk.substrates.rq import RQExecutionQueue
from schedule_sdk.substrates.rq.entries import DUE_META

pytestmark = pytest.mark.redis


def test_a_release_ahead_makes_one_job_per_future_due_instant_and_one_for_the_due(rq_settings, harnesses):
    h = harnesses(rq_settings)
    queue: RQExecutionQueue = h.container.queue()
    now = time.time() * 1000
    scores = {"a_0_1": now - 10, "b_0_1": now - 5, "c_0_1": now + 200, "d_0_1": now + 200, "e_0_1": now + 300}
    queue.activate(list(scores.items()))
    released, earliest = queue.release(now + 250, 100)
    assert sorted(released) == ["a_0_1", "b_0_1", "c_0_1", "d_0_1"] and earliest == scores["e_0_1"]
    jobs = [
        Job.fetch(i.decode(), connection=queue.connection, serializer=JSONSerializer)
        for i in queue.connection.lrange(queue.rq_queue.key, 0, -1)
    ]
    assert [(sorted(j.args[1]), j.meta[DUE_META]) for j in jobs] == [
        (["a_0_1", "b_0_1"], scores["b_0_1"]),  # due already: together, not held
        (["c_0_1", "d_0_1"], scores["c_0_1"]),
    ]
    marks = dict(queue.connection.zrange(queue.keys.released, 0, -1, withscores=True))
    assert all(mark <= time.time() * 1000 for mark in marks.values())  # marked when released


def test_fires_released_ahead_are_never_early(rq_settings, harnesses):
    h = harnesses(rq_settings)
    start = datetime.now(UTC) + timedelta(seconds=2)  # room for 40 writes on a loaded machine
    specs = [
        OneShotSpec(topic="rq.ahead", run_at=start + timedelta(milliseconds=3 * n), timezone="UTC")
        for n in range(40)
    ]
    jobs = [h.service.schedule_at(one) for one in specs]
    h.start()
    for job in jobs:
        [event] = h.wait_events(job.id, 1)
        assert event.fired_at >= event.scheduled_for == job.run_at
