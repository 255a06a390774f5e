"""On rq, Redis losing the SDK's entries wholesale is found at the next maintenance beat and
healed at once from the store, with the default settings (the periodic reconcile, every 300 s,
would come far later than any wait here): a ``FLUSHDB``, a ``FLUSHALL`` (with its statistics
reset, as a fresh server has them), a restart of a server without persistence. The health check
says degraded while the entries are gone, then names the last loss and how many entries it
handed over again; ``schedule.entries.healed`` counts them. A Sentinel failover that loses
writes is in tests/processes/test_rq_failover.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from schedule_sdk import OneShotSpec, ScheduledJob
from schedule_sdk.adapters.metrics import InMemoryMetrics
from schedule_sdk.core.health import Check, container_health
from schedule_sdk.ports import HealNote
from schedule_sdk.substrates.rq.plumbing import Keys
from schedule_sdk.substrates.rq.queue import HEALING_TTL
from tests.harness import Harness
from tests.support.rq_fixtures import PrivateRedis

pytestmark = pytest.mark.redis

#: A guard against a hang only, far below the periodic reconcile (300 s by default): a fire
#: healed by it instead of the beat's look would fail the test. How soon the heal comes is
#: measured by bench/flush_heal.py.
HEAL_WAIT = 60.0


def spec(seconds: float) -> OneShotSpec:
    return OneShotSpec(topic="rq.lost", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC")


def redis_check(h: Harness) -> Check:
    (check,) = [c for c in container_health(h.container, min_workers=0).checks if c.name == "redis"]
    return check


def all_fire(h: Harness, jobs: list[ScheduledJob]) -> None:
    for job in jobs:
        [event] = h.wait_events(job.id, 1, timeout=HEAL_WAIT)
        assert event.fired_at >= job.run_at  # never early
    h.settle()
    assert [len(h.events_for(job.id)) for job in jobs] == [1] * len(jobs)


def healed_count(h: Harness) -> int:
    metrics = h.container.metrics()
    assert isinstance(metrics, InMemoryMetrics)
    return metrics.count("schedule.entries.healed")


def healed(h: Harness, jobs: int, reason: str) -> None:
    """The health check names the last loss and its heal; the metric counts the entries."""
    check = redis_check(h)
    assert check.ok and not check.warning, check.detail
    assert "last loss" in check.detail and reason in check.detail, check.detail
    assert f"{jobs} entries handed over again" in check.detail, check.detail
    assert healed_count(h) == jobs


def test_a_flushdb_is_healed_at_the_next_beat_and_the_health_check_reports_it(
    rq_settings: dict[str, Any], harnesses: Callable[..., Harness]
) -> None:
    h = harnesses(rq_settings, metrics="memory").start()
    jobs = [h.service.schedule_at(spec(3.0 + i * 0.01)) for i in range(20)]
    redis.Redis.from_url(rq_settings["redis_url"]).flushdb()
    all_fire(h, jobs)
    healed(h, len(jobs), "marker key was gone")


def test_while_the_entries_are_gone_the_health_check_says_degraded(
    rq_settings: dict[str, Any], harnesses: Callable[..., Harness]
) -> None:
    h = harnesses(rq_settings).start()
    job = h.service.schedule_at(spec(3600))
    assert not redis_check(h).warning
    h.stop()  # no worker heals: the loss stays visible
    redis.Redis.from_url(rq_settings["redis_url"]).flushdb()
    check = redis_check(h)
    assert check.ok and check.warning and "marker key is missing" in check.detail, check.detail
    assert container_health(h.container, min_workers=0).degraded
    h.start()  # a starting worker reconciles everything, and marks the namespace
    assert not redis_check(h).warning
    assert h.worker.reconciler.heal_if_moved() is False  # and its next look finds nothing new
    assert h.job(job.id).status == "pending"


def test_a_flushall_is_healed_at_the_next_beat(
    rq_settings: dict[str, Any], harnesses: Callable[..., Harness], volatile_redis: PrivateRedis
) -> None:
    h = harnesses(rq_settings, redis_url=volatile_redis.url, metrics="memory").start()
    jobs = [h.service.schedule_at(spec(3.0 + i * 0.01)) for i in range(20)]
    client = redis.Redis(port=volatile_redis.port)
    client.flushall()
    client.config_resetstat()
    all_fire(h, jobs)
    healed(h, len(jobs), "marker key was gone")


@pytest.mark.slow
def test_a_restart_without_persistence_is_healed_once_the_server_is_back(
    rq_settings: dict[str, Any], harnesses: Callable[..., Harness], volatile_redis: PrivateRedis
) -> None:
    h = harnesses(rq_settings, redis_url=volatile_redis.url, metrics="memory").start()
    jobs = [h.service.schedule_at(spec(3.0 + i * 0.01)) for i in range(20)]
    volatile_redis.stop()
    volatile_redis.start()  # empty: no snapshot, no append-only file
    all_fire(h, jobs)
    healed(h, len(jobs), "the server restarted")


def test_a_heal_under_way_is_degraded_and_it_ages_out_if_its_worker_dies(
    rq_settings: dict[str, Any], harnesses: Callable[..., Harness]
) -> None:
    h = harnesses(rq_settings).start()
    queue = h.container.queue()
    found = time.time()
    queue.note_heal(HealNote(found, "a test's loss", 5, 0.5))
    check = redis_check(h)
    assert check.ok and check.warning, check.detail
    assert (
        "healing since" in check.detail
        and "a test's loss; 5 entries handed over again so far" in check.detail
    )
    client = redis.Redis.from_url(rq_settings["redis_url"])
    assert 0 < client.pttl(Keys(rq_settings["rq_queue"]).healing) <= HEALING_TTL * 1000
    queue.note_heal(HealNote(found, "a test's loss", 7, 1.5, done=True))
    check = redis_check(h)
    assert check.ok and not check.warning, check.detail
    assert "last loss" in check.detail and "7 entries handed over again in 1.50s" in check.detail


def test_a_loss_a_peer_healed_or_is_healing_is_not_healed_again(
    rq_settings: dict[str, Any], harnesses: Callable[..., Harness]
) -> None:
    a, b = harnesses(rq_settings, metrics="memory"), harnesses(rq_settings, metrics="memory")
    jobs = [a.service.schedule_at(spec(3600)) for _ in range(5)]
    ra, rb = a.worker.reconciler, b.worker.reconciler
    assert ra.heal_if_moved() is False and rb.heal_if_moved() is False  # the first looks record
    client = redis.Redis.from_url(rq_settings["redis_url"])
    client.flushdb()
    assert ra.heal_if_moved() is True  # a heals every entry ...
    assert rb.heal_if_moved() is False  # ... and b, finding a's heal of the same loss, does not
    assert (healed_count(a), healed_count(b)) == (len(jobs), 0)
    assert rb.heal_if_moved() is False  # b took the loss as seen
    client.flushdb()
    incarnation = b.container.queue().incarnation()  # the look that finds this loss sets the marker
    a.container.queue().note_heal(HealNote(time.time(), "a's heal", incarnation=incarnation))
    assert rb.heal_if_moved() is False  # a heal under way: b waits ...
    client.delete(Keys(rq_settings["rq_queue"]).healing)  # ... until its note ages out (a died)
    assert rb.heal_if_moved() is True
    assert healed_count(b) == len(jobs)
