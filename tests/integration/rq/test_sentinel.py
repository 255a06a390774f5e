"""The rq substrate and the Redis publisher through Sentinel (``redis+sentinel://``), on a primary,
a replica and three Sentinels of the run's own: jobs fire, the health check reaches the
primary, and a ``maxmemory-policy`` that could evict the SDK's keys is reported by the health
check and by a starting worker. Failovers are in tests/processes/test_rq_failover.py."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    ListenerRegistry,
    OneShotSpec,
    QueueUnavailable,
    ScheduleArrivedEvent,
)
from schedule_sdk.adapters.publishers.redis import RedisEventPublisher
from schedule_sdk.core.health import container_health
from schedule_sdk.domain.jobs import JobMetadata
from schedule_sdk.substrates.rq.async_handoff import connect_async
from tests.harness import Harness
from tests.support import services
from tests.support.sentinel import SentinelCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.redis


@pytest.fixture
def cluster(sentinel_cluster: SentinelCluster) -> SentinelCluster:
    return sentinel_cluster


@pytest.fixture
def settings(cluster: SentinelCluster, tmp_path: Path) -> dict[str, Any]:
    cluster.client(cluster.primary_port).flushdb()
    return {
        "database_url": f"sqlite:///{tmp_path / 'jobs.db'}",
        "redis_url": cluster.url,
        "rq_queue": services.queue_name("rqs"),
        "lease_seconds": 3.0,
        "stop_timeout": 2.0,
    }


@pytest.fixture
def evicting(cluster: SentinelCluster) -> Iterator[None]:
    primary = cluster.client(cluster.primary_port)
    primary.config_set("maxmemory-policy", "allkeys-lru")
    try:
        yield
    finally:
        primary.config_set("maxmemory-policy", "noeviction")


def spec(seconds: float) -> OneShotSpec:
    return OneShotSpec(
        topic="rq.sentinel", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC"
    )


def test_jobs_fire_through_sentinel_and_the_health_check_reaches_the_primary(
    settings: dict[str, Any], harnesses: Callable[..., Harness]
) -> None:
    h = harnesses(settings).start()
    assert h.container.settings().substrate == "rq"
    jobs = [h.service.schedule_at(spec(0.2 + i * 0.01)) for i in range(5)]
    for job in jobs:
        [event] = h.wait_events(job.id, 1)
        assert event.fired_at >= job.run_at
    (redis_check,) = [c for c in container_health(h.container).checks if c.name == "redis"]
    assert (redis_check.ok, redis_check.warning, redis_check.detail) == (True, False, "reachable")


def test_an_evicting_memory_policy_is_a_health_warning_and_a_start_warning(
    settings: dict[str, Any],
    harnesses: Callable[..., Harness],
    evicting: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="schedule_sdk.core.worker")
    h = harnesses(settings).start()
    warned = [r for r in caplog.records if "maxmemory-policy is allkeys-lru" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING
    report = container_health(h.container)
    (redis_check,) = [c for c in report.checks if c.name == "redis"]
    assert redis_check.ok and redis_check.warning
    assert "maxmemory-policy is allkeys-lru" in redis_check.detail


@pytest.mark.parametrize("policy", ["noeviction", "volatile-lru", "volatile-ttl"])
def test_a_policy_that_cannot_evict_the_sdks_keys_is_no_warning(
    settings: dict[str, Any], harnesses: Callable[..., Harness], cluster: SentinelCluster, policy: str
) -> None:
    cluster.client(cluster.primary_port).config_set("maxmemory-policy", policy)
    try:
        h = harnesses(settings)
        assert h.worker.reconciler.risks() == []
    finally:
        cluster.client(cluster.primary_port).config_set("maxmemory-policy", "noeviction")


def test_an_unknown_service_is_a_queue_error_and_nothing_is_written(
    settings: dict[str, Any], harnesses: Callable[..., Harness], cluster: SentinelCluster
) -> None:
    h = harnesses(settings, redis_url=cluster.url.replace("/sdkprimary/", "/nosuchservice/"))
    with pytest.raises(QueueUnavailable) as raised:
        h.service.schedule_at(spec(5))
    assert "nosuchservice" in str(raised.value)
    assert h.service.list(limit=10).items == []


def test_the_redis_publisher_reaches_every_instance_through_sentinel(cluster: SentinelCluster) -> None:
    registries = [ListenerRegistry(), ListenerRegistry()]
    seen: list[list[ScheduleArrivedEvent]] = [[], []]
    for registry, got in zip(registries, seen, strict=True):
        registry.connect(SCHEDULE_ARRIVED_EVENT, got.append)
    publishers = [
        RedisEventPublisher(registry=r, redis_url=cluster.url, channel="sdk_sentinel") for r in registries
    ]
    try:
        now = datetime.now(UTC)
        event = ScheduleArrivedEvent(
            scheduled_job_id="j1", topic="t", user_payload=None, metadata=JobMetadata(), timezone="UTC",
            scheduled_for=now, fired_at=now, attempt=1, occurrence=1,
        )  # fmt: skip
        later = dataclasses.replace(event, scheduled_job_id="j2")
        publishers[0].publish(event)
        publishers[0].publish(later)
        assert wait_until(lambda: all(len(got) >= 2 for got in seen), 5), seen
        assert seen == [[event, later], [event, later]]
    finally:
        for publisher in publishers:
            publisher.close()


def test_the_asyncio_client_reaches_the_primary_through_sentinel(cluster: SentinelCluster) -> None:
    async def role() -> Any:
        client = connect_async(cluster.url)
        try:
            return (await client.info("replication"))["role"]
        finally:
            await client.aclose()

    assert asyncio.run(role()) == "master"


@pytest.mark.postgres
def test_the_asyncio_service_hands_off_through_sentinel(
    settings: dict[str, Any], harnesses: Callable[..., Harness], database_url_factory: Callable[[str], str]
) -> None:
    h = harnesses({**settings, "database_url": database_url_factory("postgres")})
    h.service_kind = "async"  # the hand-off on redis.asyncio in SQLAlchemy's greenlet bridge
    h.start()
    job = h.service.schedule_at(spec(0.2))
    [event] = h.wait_events(job.id, 1)
    assert event.fired_at >= job.run_at


def test_the_health_command_shows_an_evicting_policy_as_a_warning_and_never_the_password(
    settings: dict[str, Any], cluster: SentinelCluster, evicting: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from schedule_sdk.entrypoints.cli import main

    def health(url: str) -> tuple[int, str]:
        code = main(
            ["--database-url", settings["database_url"], "--redis-url", url, "health", "--min-workers", "0"]
        )
        out, err = capsys.readouterr()
        return code, out + err

    code, out = health(cluster.url)
    (line,) = [row for row in out.splitlines() if row.startswith("redis")]
    assert "WARN" in line and "maxmemory-policy is allkeys-lru" in line
    assert code == 0 and out.rstrip().endswith("healthy (degraded)")  # a warning degrades, never fails
    secret = cluster.url.replace("redis+sentinel://", "redis+sentinel://:Hunter2Secret@")
    code, out = health(secret.replace("/sdkprimary/", "/nosuchservice/"))
    assert code == 4 and "No master found for 'nosuchservice'" in out and "Hunter2Secret" not in out
