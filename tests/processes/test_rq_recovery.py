"""Healing on the rq substrate: Redis flushed while stopped or running, concurrent reconcilers,
a Redis server that goes away and comes back."""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime, timedelta

import pytest
import redis

from schedule_sdk import IntervalRepeat, OneShotSpec, QueueUnavailable, RepeatSpec
from tests.support import services
from tests.support.waiting import wait_until

pytestmark = pytest.mark.redis


def spec(seconds: float) -> OneShotSpec:
    return OneShotSpec(topic="rq.heal", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC")


def test_flushdb_while_stopped_then_restart_fires_everything(rq_settings, harnesses):
    h = harnesses(rq_settings).start()
    jobs = [h.service.schedule_at(spec(0.8 + i * 0.02)) for i in range(20)]
    h.stop()
    services.RedisDbs.flush(rq_settings["redis_url"])
    h.wait_past(jobs[-1].run_at)  # all are past due now
    h2 = harnesses(rq_settings).start()  # the boot reconciler re-enqueues them; past due fire at once
    for job in jobs:
        [event] = h2.wait_events(job.id, 1)
        assert event.fired_at >= job.run_at
    for job in jobs:
        h2.wait_status(job.id, "completed")


def test_flushdb_while_running_is_healed_by_the_periodic_reconcile(rq_settings, harnesses):
    h = harnesses(rq_settings, reconcile_interval=1.0).start()
    jobs = [h.service.schedule_at(spec(0.5)) for _ in range(10)]
    repeating = h.service.schedule_repeat(
        RepeatSpec(topic="rq.heal", timezone="UTC", repeat=IntervalRepeat(every_ms=300))
    )
    services.RedisDbs.flush(rq_settings["redis_url"])
    for job in jobs:
        h.wait_events(job.id, 1)
    h.wait_events(repeating.id, 3)
    h.settle()
    assert all(len(h.events_for(j.id)) == 1 for j in jobs)


def test_two_processes_reconciling_at_once_do_not_double_fire(rq_settings, harnesses):
    a, b = harnesses(rq_settings), harnesses(rq_settings)
    jobs = [a.service.schedule_at(spec(0.3)) for _ in range(30)]
    services.RedisDbs.flush(rq_settings["redis_url"])
    a.wait_past(max(j.run_at for j in jobs))
    threads = [threading.Thread(target=h.worker.reconciler.run) for h in (a, b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    a.start(), b.start()
    for job in jobs:
        assert a.wait_for(lambda j=job: len(a.events_for(j.id)) + len(b.events_for(j.id)) >= 1)
    a.settle()
    assert [len(a.events_for(j.id)) + len(b.events_for(j.id)) for j in jobs] == [1] * len(jobs)


@pytest.mark.slow
def test_redis_down_scheduling_raises_and_the_worker_resumes_after_restart(
    rq_settings, harnesses, private_redis
):
    h = harnesses(rq_settings, redis_url=private_redis.url).start()
    before = h.service.schedule_at(spec(1.5))  # falls due during the outage
    private_redis.stop()
    try:
        with pytest.raises(QueueUnavailable):
            h.service.schedule_at(spec(0.5))
        assert [j.id for j in h.service.list(limit=10).items] == [before.id]  # nothing written
        h.wait_past(before.run_at + timedelta(seconds=0.5))
    finally:
        private_redis.start()
    [event] = h.wait_events(before.id, 1, timeout=20)  # the pump and worker reconnected
    assert event.fired_at >= before.run_at
    after = h.service.schedule_at(spec(0.2))
    h.wait_events(after.id, 1)
    h.settle()
    assert len(h.events_for(before.id)) == 1


def test_redis_event_publisher_reaches_every_instance_once(redis_url):
    from schedule_sdk import SCHEDULE_ARRIVED_EVENT, ListenerRegistry, ScheduleArrivedEvent
    from schedule_sdk.adapters.publishers.redis import RedisEventPublisher
    from schedule_sdk.domain.jobs import JobMetadata

    registries = [ListenerRegistry(), ListenerRegistry()]
    seen: list[list[ScheduleArrivedEvent]] = [[], []]
    for registry, got in zip(registries, seen, strict=True):
        registry.connect(SCHEDULE_ARRIVED_EVENT, got.append)
    channel = f"sdk_test_events_{services.RUN_ID}"
    publishers = [RedisEventPublisher(registry=r, redis_url=redis_url, channel=channel) for r in registries]
    try:
        now = datetime.now(UTC)
        event = ScheduleArrivedEvent(
            scheduled_job_id="j1", topic="t", user_payload={"a": 1}, metadata=JobMetadata(), timezone="UTC",
            scheduled_for=now, fired_at=now, attempt=1, occurrence=1,
        )  # fmt: skip
        later = dataclasses.replace(event, scheduled_job_id="j2")
        publishers[0].publish(event)
        publishers[0].publish(later)  # once both have it, a second copy of the first would show
        assert wait_until(lambda: all(len(got) >= 2 for got in seen), 5), seen
        assert seen == [[event, later], [event, later]]
    finally:
        for publisher in publishers:
            publisher.close()
    assert redis.Redis.from_url(redis_url).ping()
