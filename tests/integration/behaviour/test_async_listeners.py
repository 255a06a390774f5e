"""``async def`` listeners on every backend: they run on the app's event loop when the worker is
started from async code and on one long-lived loop otherwise, so an app-wide async client (an
``httpx.AsyncClient`` with a pooled keep-alive connection to a real local HTTP server) works across
fires; they are bounded by the worker's threads and released at stop like any other fire."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from schedule_sdk import JobStatus, OneShotSpec, RetryPolicy, schedule_arrived_event_name
from tests.support.waiting import wait_until
from tests.support.webhook import Webhook

TOPIC = "tests.async"


def one_shot(seconds: float = 0.3, **changes: object) -> OneShotSpec:
    values: dict[str, object] = {
        "topic": TOPIC,
        "run_at": datetime.now(UTC) + timedelta(seconds=seconds),
        "timezone": "UTC",
    }
    values.update(changes)
    return OneShotSpec(**values)  # type: ignore[arg-type]


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.close()


def test_async_listeners_run_on_the_apps_loop_with_its_shared_client(backend, webhook):
    h = backend.harness()

    async def app() -> tuple[asyncio.AbstractEventLoop, list[asyncio.AbstractEventLoop], list[str]]:
        app_loop = asyncio.get_running_loop()
        client = httpx.AsyncClient(base_url=webhook.url)  # one client for the app, bound to its loop
        lock = asyncio.Lock()
        loops: list[asyncio.AbstractEventLoop] = []
        done: list[str] = []

        async def on_arrived(event):
            async with lock:
                response = await client.post("/hook", json={"job": event.scheduled_job_id})
                response.raise_for_status()
                loops.append(asyncio.get_running_loop())
                done.append(event.scheduled_job_id)

        h.listen(schedule_arrived_event_name(TOPIC), on_arrived)
        async with h.worker:
            for i in range(3):
                job = await asyncio.to_thread(h.service.schedule_at, one_shot(0.2))
                await asyncio.to_thread(h.wait_status, job.id, "completed", "failed", "pending")
                assert await asyncio.to_thread(h.wait_for, lambda n=i: len(done) > n), h.job(job.id)
        await client.aclose()
        return app_loop, loops, done

    app_loop, loops, done = asyncio.run(app())
    assert loops == [app_loop] * 3
    assert [body["job"] for body in webhook.received] == done
    assert len(webhook.connections) == 1  # the pooled connection was reused across fires
    for job_id in done:
        assert h.job(job_id).status is JobStatus.COMPLETED and h.job(job_id).attempt == 1


def test_started_from_sync_code_async_listeners_share_one_long_lived_loop(backend, webhook):
    h = backend.harness().start()
    clients: list[httpx.AsyncClient] = []
    loops: list[asyncio.AbstractEventLoop] = []

    async def on_arrived(event):
        if not clients:  # created on the first fire, reused by the next ones (as an app would cache it)
            clients.append(httpx.AsyncClient(base_url=webhook.url))
        response = await clients[0].post("/hook", json={"job": event.scheduled_job_id})
        response.raise_for_status()
        loops.append(asyncio.get_running_loop())

    h.listen(schedule_arrived_event_name(TOPIC), on_arrived)
    jobs = []
    for _ in range(3):
        job = h.service.schedule_at(one_shot(0.2, retry=RetryPolicy(attempts=1)))
        h.wait_status(job.id, "completed", "failed")
        jobs.append(job)
    assert [h.job(j.id).status for j in jobs] == [JobStatus.COMPLETED] * 3, [h.job(j.id) for j in jobs]
    assert len(loops) == 3 and len(set(map(id, loops))) == 1
    assert len(webhook.connections) == 1
    h.stop()
    h.container.listener_loop().run(clients[0].aclose())


def test_a_slow_async_listener_holds_only_its_own_thread(backend):
    h = backend.harness(worker_concurrency=2)
    release = threading.Event()
    synced: list[str] = []

    async def slow(event):
        await asyncio.to_thread(release.wait, 30)

    h.listen(schedule_arrived_event_name("tests.slow"), slow)
    h.listen(schedule_arrived_event_name(TOPIC), lambda event: synced.append(event.scheduled_job_id))

    async def app() -> None:
        async with h.worker:
            slow_job = await asyncio.to_thread(h.service.schedule_at, one_shot(0.1, topic="tests.slow"))
            await asyncio.to_thread(h.wait_status, slow_job.id, "active")
            fast = [await asyncio.to_thread(h.service.schedule_at, one_shot(0.2)) for _ in range(3)]
            for job in fast:  # sync listeners and other jobs go on meanwhile, on the other thread
                await asyncio.to_thread(h.wait_status, job.id, "completed")
            assert h.job(slow_job.id).status is JobStatus.ACTIVE
            release.set()
            await asyncio.to_thread(h.wait_status, slow_job.id, "completed")
        assert sorted(synced) == sorted(j.id for j in fast)

    asyncio.run(app())


def test_async_listeners_are_bounded_by_the_worker_concurrency(backend):
    h = backend.harness(worker_concurrency=2)
    running = 0
    peak = 0

    async def busy(event):
        nonlocal running, peak
        running += 1  # all on the one app loop: no lock needed
        peak = max(peak, running)
        await asyncio.sleep(0.2)
        running -= 1

    h.listen(schedule_arrived_event_name(TOPIC), busy)

    async def app() -> None:
        async with h.worker:
            jobs = [await asyncio.to_thread(h.service.schedule_at, one_shot(0.2)) for _ in range(6)]
            for job in jobs:
                await asyncio.to_thread(h.wait_status, job.id, "completed")

    asyncio.run(app())
    assert peak == 2


def test_a_raising_async_listener_fails_the_fire(backend):
    h = backend.harness().start()

    async def broken(event):
        await asyncio.sleep(0)
        raise RuntimeError("webhook said no")

    h.listen(schedule_arrived_event_name(TOPIC), broken)
    job = h.service.schedule_at(one_shot(0.2, retry=RetryPolicy(attempts=1)))
    failed = h.wait_status(job.id, "failed")
    assert failed.last_error is not None and "webhook said no" in failed.last_error


def test_stop_awaits_in_flight_async_listeners_then_releases_the_rest(backend):
    h = backend.harness(worker_concurrency=2)
    entered = threading.Event()
    finished: list[str] = []

    async def short(event):
        entered.set()
        await asyncio.sleep(0.3)
        finished.append(event.scheduled_job_id)

    async def endless(event):
        await asyncio.Event().wait()

    h.listen(schedule_arrived_event_name(TOPIC), short)
    h.listen(schedule_arrived_event_name("tests.endless"), endless)

    async def app() -> tuple[str, str]:
        await h.worker.start_async()
        stuck = await asyncio.to_thread(h.service.schedule_at, one_shot(0.1, topic="tests.endless"))
        await asyncio.to_thread(h.wait_status, stuck.id, "active")
        job = await asyncio.to_thread(h.service.schedule_at, one_shot(0.1))
        assert await asyncio.to_thread(entered.wait, 5)
        # returns although one listener never ends (a hang fails here, not at the test's timeout)
        await asyncio.wait_for(h.worker.stop_async(timeout=1.5), 15)
        return job.id, stuck.id

    job_id, stuck_id = asyncio.run(app())
    assert finished == [job_id] and h.job(job_id).status is JobStatus.COMPLETED
    stuck = h.job(stuck_id)  # released for another worker, its attempt not spent
    assert stuck.status is JobStatus.PENDING and stuck.claimed_by is None and stuck.attempt == 1
    h.container.shutdown_resources()

    def names() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("schedule-sdk-listener")]

    assert wait_until(lambda: not names(), 10), names()  # the threads that awaited the endless listener


def test_a_sync_stop_on_the_apps_own_loop_cannot_deadlock(backend):
    h = backend.harness(worker_concurrency=1, stop_timeout=0.5)

    async def waits_for_the_loop(event):
        await asyncio.sleep(0.05)

    h.listen(schedule_arrived_event_name(TOPIC), waits_for_the_loop)

    async def app() -> str:
        await h.worker.start_async()
        job = await asyncio.to_thread(h.service.schedule_at, one_shot(0.1))
        await asyncio.to_thread(h.wait_status, job.id, "active", "completed")
        h.worker.stop()  # blocks the app's loop, which the listener needs: bounded by stop_timeout
        return job.id

    job_id = asyncio.run(app())  # a deadlock would never get here
    stopped = h.job(job_id)  # finished before the stop, or released for another worker
    assert stopped.status in (JobStatus.COMPLETED, JobStatus.PENDING) and stopped.claimed_by is None
