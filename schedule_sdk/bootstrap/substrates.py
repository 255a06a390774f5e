"""The ``rq`` substrate's objects, built from the settings (the composition root's part for it).

The container calls these lazily, so Redis and RQ are imported only when the settings select the
``rq`` substrate. Substrates never read settings themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from schedule_sdk.bootstrap.settings import Settings
from schedule_sdk.core.health import RedisLook
from schedule_sdk.ports import Clock, DelayIndex, Dispatcher, ExecutionQueue, FirePath, JobStore, Metrics

if TYPE_CHECKING:
    from schedule_sdk.substrates.rq.async_handoff import AsyncRQHandOff
    from schedule_sdk.substrates.rq.fire import SyncRuntime
    from schedule_sdk.substrates.rq.queue import RQExecutionQueue
    from schedule_sdk.substrates.rq.runner import RQRunner


def _stale_after(settings: Settings) -> float:
    """How old a staged or released entry must be to count as missing: longer than any
    transaction, and than a lease (a live consumer renews its marks within one)."""
    return max(60.0, 2 * settings.lease_seconds)


def rq_queue(settings: Settings, metrics: Metrics | None = None) -> RQExecutionQueue:
    from schedule_sdk.substrates.rq.queue import RQExecutionQueue

    assert settings.redis_url is not None
    return RQExecutionQueue(
        redis_url=settings.redis_url,
        queue_name=settings.rq_queue,
        stale_after=_stale_after(settings),
        metrics=metrics,
    )


def rq_async_queue(settings: Settings) -> AsyncRQHandOff:
    from schedule_sdk.substrates.rq.async_handoff import AsyncRQHandOff

    assert settings.redis_url is not None
    return AsyncRQHandOff(
        redis_url=settings.redis_url, queue_name=settings.rq_queue, stale_after=_stale_after(settings)
    )


def rq_runner(
    *, settings: Settings, queue: ExecutionQueue, store: JobStore, dispatcher: Dispatcher, clock: Clock
) -> RQRunner:
    from schedule_sdk.substrates.rq.runner import RQRunner

    if not isinstance(queue, DelayIndex):
        raise TypeError("the rq runner needs the rq substrate's queue (a DelayIndex)")
    return RQRunner(
        queue=queue, store=store, dispatcher=dispatcher, clock=clock, lease_seconds=settings.lease_seconds
    )


def rq_job_runtime(
    *, settings: Settings, queue: ExecutionQueue, firing: FirePath, store: JobStore, clock: Clock
) -> SyncRuntime:
    from schedule_sdk.substrates.rq.fire import SyncRuntime

    if not isinstance(queue, DelayIndex):
        raise RuntimeError("the rq fire function needs SCHEDULE_REDIS_URL (the rq substrate)")
    return SyncRuntime(
        firing=firing,
        store=store,
        queue=queue,
        clock=clock,
        worker_id=settings.worker_id,
        lease_seconds=settings.lease_seconds,
    )


def redis_probe(settings: Settings) -> Callable[[], RedisLook]:
    """The health check's look at Redis (``settings.redis_url``, a server or a Sentinel service):
    a function that pings it and returns the ways its configuration could lose the SDK's keys
    (:func:`~schedule_sdk.substrates.rq.plumbing.eviction_risks`) and, on the ``rq`` substrate,
    whether entries were lost and how their heal goes
    (:func:`~schedule_sdk.substrates.rq.plumbing.heal_notes`); it raises when Redis does not
    answer."""
    from schedule_sdk.substrates.rq import plumbing

    assert settings.redis_url is not None
    url, keys = settings.redis_url, plumbing.Keys(settings.rq_queue)
    substrate = settings.substrate

    def probe() -> RedisLook:
        client = plumbing.connect(url, timeout=2.0)
        try:
            client.ping()
            risks = plumbing.eviction_risks(client)
            if substrate != "rq":
                return RedisLook(risks)
            lost, notes = plumbing.heal_notes(client, keys)
            return RedisLook([*risks, *lost], notes)
        finally:
            client.close()

    return probe
