"""On rq, a worker the registry declares dead hands over at once what only it was doing: its pump
lock (deleted by compare-and-delete when it holds it) and the entries its consumer had popped
but never claimed. Both would otherwise wait: the lock for its TTL, the entries for the lease;
the tests make those long enough that only the takeover can pass them."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import redis

from schedule_sdk import OneShotSpec
from schedule_sdk.ports import Occurrence, WorkerInfo, WorkerRegistry, require
from schedule_sdk.substrates.rq import RQExecutionQueue
from schedule_sdk.substrates.rq.pump import DuePump

pytestmark = pytest.mark.redis

LONG = 600.0  # seconds: longer than any test waits


def _dead_row(worker_id: str) -> WorkerInfo:
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    return WorkerInfo(
        id=worker_id, host="elsewhere", pid=1, substrate="rq", started_at=long_ago, last_beat=long_ago
    )


def _soon() -> OneShotSpec:
    return OneShotSpec(topic="rq.dead", run_at=datetime.now(UTC) + timedelta(seconds=0.05), timezone="UTC")


def _token(worker_id: str) -> str:
    return f"{worker_id}/{'0' * 32}"


def test_drop_lock_of_deletes_the_lock_only_when_one_of_the_named_workers_holds_it(rq_settings, harnesses):
    queue: RQExecutionQueue = harnesses(rq_settings).container.queue()
    r = redis.Redis.from_url(rq_settings["redis_url"], decode_responses=True)
    pump = DuePump(queue, owner="me")
    r.set(queue.keys.pump, _token("w-1"), px=int(LONG * 1000))
    assert pump.drop_lock_of([]) is False
    assert pump.drop_lock_of(["w", "w-12", "1", "me"]) is False  # no prefix or suffix match
    assert r.get(queue.keys.pump) == _token("w-1")
    assert pump.drop_lock_of(["w-0", "w-1"]) is True
    assert r.get(queue.keys.pump) is None
    assert pump.drop_lock_of(["w-1"]) is False  # nothing to drop
    assert pump.token.startswith("me/") and len(pump.token) == len("me/") + 32


def test_a_live_worker_takes_a_dead_workers_pump_lock_at_once_and_fires(rq_settings, harnesses):
    h = harnesses(rq_settings)
    queue: RQExecutionQueue = h.container.queue()
    r = redis.Redis.from_url(rq_settings["redis_url"], decode_responses=True)
    r.set(queue.keys.pump, _token("dead-pump"), px=int(LONG * 1000))  # as a kill -9 leaves it
    require(h.store, WorkerRegistry, "the test").beat(_dead_row("dead-pump"))
    job = h.service.schedule_at(_soon())
    h.start()
    pump = h.container.runner().pump
    assert h.wait_for(lambda: pump.leading, 10)
    assert r.get(queue.keys.pump) == pump.token == f"{h.container.settings().worker_id}/{pump.token[-32:]}"
    assert len(h.wait_events(job.id, 1, timeout=10)) == 1


def test_a_live_workers_pump_lock_is_left_alone(rq_settings, harnesses):
    h = harnesses(rq_settings)
    queue: RQExecutionQueue = h.container.queue()
    r = redis.Redis.from_url(rq_settings["redis_url"], decode_responses=True)
    r.set(queue.keys.pump, _token("live-pump"), px=int(LONG * 1000))
    require(h.store, WorkerRegistry, "the test").beat(_dead_row("someone-else"))
    runner = h.container.runner()
    declared: list[list[str]] = []
    peers_dead = runner.peers_dead
    runner.peers_dead = lambda ids: (declared.append(list(ids)), peers_dead(ids))[-1]  # type: ignore[method-assign]
    tries: list[bool] = []  # each attempt of the pump to take the lock, and whether it got it
    lead = runner.pump._lead

    def counted() -> bool:
        tries.append(lead())
        return tries[-1]

    runner.pump._lead = counted  # type: ignore[method-assign]
    h.start()
    assert h.wait_for(lambda: ["someone-else"] in declared, 10)  # a beat declared someone-else dead
    since = len(tries)
    assert h.wait_for(lambda: len(tries) >= since + 2, 10)  # and the pump tried the lock again since
    assert not any(tries)
    assert r.get(queue.keys.pump) == _token("live-pump")
    assert not h.container.runner().pump.leading


def test_entries_a_dead_consumer_popped_are_handed_over_long_before_the_lease(rq_settings, harnesses):
    h = harnesses(rq_settings, lease_seconds=LONG)
    queue: RQExecutionQueue = h.container.queue()
    r = redis.Redis.from_url(rq_settings["redis_url"])
    job = h.service.schedule_at(_soon())
    key = Occurrence.of(job).key
    h.wait_past(job.run_at)
    assert queue.release_due(time.time() * 1000, 10) == [key]
    assert r.lpop(queue.rq_queue.key) is not None  # the dead worker's consumer took it ...
    r.zadd(queue.keys.released, {key: (time.time() - 2.0) * 1000}, xx=True)  # ... 2 s ago, then died
    require(h.store, WorkerRegistry, "the test").beat(_dead_row("dead-consumer"))
    h.start()
    [event] = h.wait_events(job.id, 1, timeout=15)
    assert event.occurrence == 1 and h.wait_status(job.id, "completed").occurrence_count == 1
