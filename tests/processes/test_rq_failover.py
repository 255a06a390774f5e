"""A Redis failover that loses writes, on the rq substrate through Sentinel: a primary, a replica
and three Sentinels of the test's own; the primary is killed with SIGKILL while the replica lacks
its latest writes. The SDK follows the Sentinels to the new primary, notices that the server
changed and reconciles at once: every acknowledged job fires, none early, no cancelled one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from schedule_sdk import IntervalRepeat, OneShotSpec, QueueUnavailable, RepeatSpec, ScheduledJob
from schedule_sdk.core.health import container_health
from schedule_sdk.ports import Occurrence
from schedule_sdk.substrates.rq.plumbing import Keys
from tests.harness import Harness
from tests.support import services
from tests.support.sentinel import SentinelCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]

#: How long the waits for the healed fires may take: a guard against a hang, far below the periodic
#: reconcile (none within the hour here), so a fire healed by a later reconcile instead of the
#: one that follows the server change would fail the test. How soon the heal comes (the documented
#: bound, docs/howto/production-rq.md) is measured by bench/failover.py.
HEAL_WAIT = 90.0


class Stream:
    """A thread that schedules one-shots due 0.3 s later, one every 20 ms, until stopped: those
    that returned are acknowledged; those refused (``QueueUnavailable``: no primary) counted."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.acknowledged: list[ScheduledJob] = []
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            try:
                self.acknowledged.append(self.harness.service.schedule_at(spec(0.3)))
            except QueueUnavailable:
                self.refused += 1


def count_jobs(h: Harness) -> int:
    page = h.service.list(limit=500)
    total = len(page.items)
    while page.next_cursor is not None:
        page = h.service.list(limit=500, cursor=page.next_cursor)
        total += len(page.items)
    return total


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SentinelCluster]:
    folder = tmp_path / "redis"
    folder.mkdir()
    servers = SentinelCluster(folder)
    try:
        yield servers.start()
    finally:
        servers.close()


def spec(seconds: float) -> OneShotSpec:
    return OneShotSpec(
        topic="rq.failover", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC"
    )


def entries(cluster: SentinelCluster, port: int, queue: str) -> set[str]:
    """Every occurrence key the SDK holds on the server at ``port`` (delay index, staged, released)."""
    client, keys = cluster.client(port), Keys(queue)
    return {m.decode() for key in (keys.delay, keys.staged, keys.released) for m in client.zrange(key, 0, -1)}


@pytest.mark.timeout(90)  # starting the Sentinels (about 5 s) and a failover (about 3 s) on top
def test_a_failover_that_loses_writes_loses_no_job(
    cluster: SentinelCluster,
    tmp_path: Path,
    harnesses: Callable[..., Harness],
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = services.queue_name("rqf")
    settings: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path / 'jobs.db'}",
        "substrate": "rq",
        "redis_url": cluster.url,
        "rq_queue": queue,
        "lease_seconds": 3.0,
        "stop_timeout": 2.0,
        "reconcile_interval": 3600.0,  # no periodic reconcile: only the failover check can heal
    }
    h = harnesses(settings).start()
    early = [h.service.schedule_at(spec(1.5 + i * 0.01)) for i in range(20)]
    doomed = [h.service.schedule_at(spec(3.0)) for _ in range(10)]
    assert cluster.synced()

    cluster.cut_replication()
    for job in doomed:  # cancelled on the primary only: the new one still holds their entries
        h.service.cancel(job.id)
    lost = [h.service.schedule_at(spec(2.5 + i * 0.01)) for i in range(30)]
    repeating = h.service.schedule_repeat(
        RepeatSpec(topic="rq.failover", timezone="UTC", repeat=IntervalRepeat(every_ms=700))
    )
    written = entries(cluster, cluster.primary_port, queue)
    caplog.set_level(logging.WARNING, logger="schedule_sdk.core.reconciler")
    stream = Stream(h)  # an app that keeps scheduling through the kill and the failover
    stream.start()
    assert wait_until(lambda: len(stream.acknowledged) >= 5)
    cluster.kill_primary()
    kept = entries(cluster, cluster.replica_port, queue)

    # The loss is real: the new primary lacks the entries of every job written after the cut,
    # and still holds those of the jobs cancelled after it.
    lost_keys = {Occurrence.of(job).key for job in [*lost, repeating]}
    assert lost_keys <= written
    assert not lost_keys & kept
    assert {Occurrence.of(job).key for job in doomed} <= kept

    cluster.wait_failover()
    after = len(stream.acknowledged)
    assert wait_until(lambda: len(stream.acknowledged) >= after + 5)  # writes go to the new primary
    stream.stop()
    one_shots = [*early, *lost, *stream.acknowledged]
    acknowledged = [*one_shots, repeating]
    assert stream.refused, "no write met the outage: the kill did not cut the app off"
    total = len(early) + len(doomed) + len(lost) + 1 + len(stream.acknowledged)
    assert count_jobs(h) == total  # a refused write wrote nothing
    for job in one_shots:
        [event] = h.wait_events(job.id, 1, timeout=HEAL_WAIT)
        assert event.fired_at >= job.run_at  # never early
    fires = h.wait_events(repeating.id, 2, timeout=HEAL_WAIT)
    assert all(e.fired_at >= e.scheduled_for for e in fires)

    h.settle()
    assert [len(h.events_for(job.id)) for job in one_shots] == [1] * len(one_shots)
    assert [h.events_for(job.id) for job in doomed] == [[]] * len(doomed)  # none cancelled fired
    assert all(h.job(job.id).status == "completed" for job in one_shots)
    assert h.job(repeating.id).status == "pending"
    occurrences = [e.occurrence for e in h.events_for(repeating.id)]
    assert len(occurrences) == len(set(occurrences))  # each occurrence once
    assert any("server changed" in r.getMessage() for r in caplog.records), (
        "healed, but not by the failover check"
    )
    assert all(h.events_for(job.id) for job in acknowledged)  # every acknowledged job fired
    # The health check names the loss and its heal, and counts as healthy again.
    (check,) = [c for c in container_health(h.container, min_workers=0).checks if c.name == "redis"]
    assert check.ok and not check.warning, check.detail
    assert "last loss" in check.detail and "the Redis server changed" in check.detail, check.detail
    assert "entries handed over again" in check.detail, check.detail
