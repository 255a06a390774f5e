"""The rq substrate across processes: pump failover after SIGKILL, a worker killed mid-fire,
and stock ``rq worker`` processes executing the fires the pump released."""

from __future__ import annotations

import signal
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
import redis

from schedule_sdk import OneShotSpec, ScheduleContainer
from schedule_sdk.ports import WorkerRegistry, require
from schedule_sdk.substrates.rq.plumbing import Keys
from tests.support.rq_fixtures import env_of, read_events, release_all, run_stock_rq_worker, spawn_worker
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def spec(seconds: float) -> OneShotSpec:
    return OneShotSpec(
        topic="rq.procs", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC"
    )


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _holder_pid(lock: bytes, store) -> int:
    """The pid of the worker whose id the pump lock names (``<worker id>/<32 hex>``), from the
    worker registry."""
    worker_id = lock.decode().rsplit("/", 1)[0]
    [pid] = [w.pid for w in require(store, WorkerRegistry, "the test").workers() if w.id == worker_id]
    return pid


def test_one_pump_is_active_and_another_takes_over_after_a_sigkill(rq_settings, harnesses, tmp_path):
    events = tmp_path / "events"
    workers = [spawn_worker(rq_settings, events) for _ in range(2)]
    try:
        r = redis.Redis.from_url(rq_settings["redis_url"])
        lock = Keys(rq_settings["rq_queue"]).pump
        assert wait_until(lambda: r.get(lock) is not None)
        store = harnesses(rq_settings).store
        holder = _holder_pid(r.get(lock), store)
        assert holder in {w.pid for w in workers}
        [leader] = [w for w in workers if w.pid == holder]
        [other] = [w for w in workers if w.pid != holder]
        service = harnesses(rq_settings).service
        leader.send_signal(signal.SIGKILL)
        leader.wait()
        job = service.schedule_at(spec(0.1))
        assert wait_until(lambda: any(e[0] == job.id for e in read_events(events)), timeout=30)
        assert [e[3] for e in read_events(events) if e[0] == job.id] == [other.pid]
        assert _holder_pid(r.get(lock), store) == other.pid
    finally:
        for worker in workers:
            stop(worker)


def test_a_worker_killed_mid_fire_is_fired_again_after_the_lease(rq_settings, harnesses, tmp_path):
    events = tmp_path / "events"
    service = harnesses(rq_settings).service
    slow = spawn_worker(rq_settings, events, SDK_TEST_SLEEP="30")
    try:
        job = service.schedule_at(spec(0.2))
        assert wait_until(lambda: service.get_by_id(job.id).status.value == "active")
        slow.send_signal(signal.SIGKILL)
        slow.wait()
    finally:
        stop(slow)
    survivor = spawn_worker(rq_settings, events)
    try:
        assert wait_until(lambda: service.get_by_id(job.id).status.value == "completed", timeout=20)
        assert [(e[0], e[3]) for e in read_events(events)] == [(job.id, survivor.pid)]
    finally:
        stop(survivor)


@pytest.mark.parametrize("worker_class", ["rq.worker.SimpleWorker", "rq.worker.Worker"])
def test_stock_rq_workers_execute_the_released_fires(rq_settings, harnesses, tmp_path, worker_class):
    events = tmp_path / "events"
    h = harnesses(rq_settings)
    jobs = [h.service.schedule_at(spec(0.2)) for _ in range(5)]
    release_all(h, len(jobs))
    run_stock_rq_worker(
        rq_settings,
        worker_class,
        SCHEDULE_LISTENER_MODULES="tests.support.rq_listeners",
        SDK_TEST_EVENTS=str(events),
    )
    assert sorted(e[0] for e in read_events(events)) == sorted(j.id for j in jobs)
    assert all(h.job(j.id).status.value == "completed" for j in jobs)


def test_the_container_builds_the_rq_substrate_from_the_environment(rq_settings, monkeypatch):
    for key, value in env_of(rq_settings).items():
        if key.startswith("SCHEDULE_"):
            monkeypatch.setenv(key, value)
    monkeypatch.delenv("SCHEDULE_SUBSTRATE")  # SCHEDULE_REDIS_URL alone selects rq
    container = ScheduleContainer()
    try:
        assert type(container.queue()).__name__ == "RQExecutionQueue"
        assert type(container.runner()).__name__ == "RQRunner"
    finally:
        container.shutdown_resources()
