"""A container wired for one test: its own listener registry, an event recorder, wait helpers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    ListenerRegistry,
    OneShotSpec,
    ScheduleArrivedEvent,
    ScheduleContainer,
    ScheduledJob,
    ScheduleService,
    ScheduleWorker,
)
from schedule_sdk.ports import JobStore
from tests.support.waiting import HANG, wait_until, with_lead

#: The topic of :meth:`Harness.settle`'s marker jobs.
MARKER_TOPIC = "tests.settle-marker"


class AsyncServiceFromSync:
    """The container's AsyncScheduleService, called from sync test code: every call is awaited on
    one event loop of its own thread (the service's pooled connections belong to that loop)."""

    def __init__(self, container: ScheduleContainer) -> None:
        self._container = container
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="test-async-service", daemon=True)
        self._thread.start()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._container.async_schedule_service(), name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(method(*args, **kwargs), self._loop).result()

        return call

    def close(self) -> None:
        async def dispose() -> None:
            await self._container.async_engine().dispose()
            queue = self._container.async_queue()
            if hasattr(queue, "aclose"):
                await queue.aclose()

        asyncio.run_coroutine_threadsafe(dispose(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()


class Harness:
    def __init__(self, settings: dict[str, Any], service_kind: str = "sync") -> None:
        #: "sync": ``service`` is the ScheduleService; "async": the AsyncScheduleService (awaited for you).
        self.service_kind = service_kind
        self._async: AsyncServiceFromSync | None = None
        self.container = ScheduleContainer()
        self.container.config.from_dict(settings)
        self.registry: ListenerRegistry = self.container.listeners()
        self.events: list[ScheduleArrivedEvent] = []
        self.markers: list[ScheduleArrivedEvent] = []  # the events of settle()'s marker jobs
        self._changed = threading.Condition()
        self.registry.connect(SCHEDULE_ARRIVED_EVENT, self._record)

    def _record(self, event: ScheduleArrivedEvent) -> None:
        with self._changed:
            (self.markers if event.topic == MARKER_TOPIC else self.events).append(event)
            self._changed.notify_all()

    @property
    def service(self) -> ScheduleService:
        if self.service_kind == "async":
            if self._async is None:
                self._async = AsyncServiceFromSync(self.container)
            return self._async  # type: ignore[return-value]  # the same methods, awaited for you
        return self.container.schedule_service()

    @property
    def store(self) -> JobStore:
        return self.container.store()

    @property
    def worker(self) -> ScheduleWorker:
        return self.container.worker()

    def start(self) -> Harness:
        self.worker.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        self.worker.stop(timeout)

    def schedule_soon(self, build: Callable[[float], OneShotSpec], lead: float) -> ScheduledJob:
        """``service.schedule_at(build(lead))``: a one-shot due ``lead`` seconds after now, made
        again with a longer lead if the service found it already past
        (:func:`tests.support.waiting.with_lead`)."""
        return with_lead(lambda seconds: self.service.schedule_at(build(seconds)), lead)

    def deafen(self) -> Harness:
        """Take the harness's own recorder off: fires of topics nobody listens to go unheard."""
        self.registry.disconnect(SCHEDULE_ARRIVED_EVENT, self._record)
        return self

    def listen(self, name: str, fn: Callable[[ScheduleArrivedEvent], Any]) -> None:
        self.registry.connect(name, fn)

    def events_for(self, job_id: str) -> list[ScheduleArrivedEvent]:
        with self._changed:
            return [e for e in self.events if e.scheduled_job_id == job_id]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = HANG) -> bool:
        """Wait until ``predicate()`` holds (:func:`tests.support.waiting.wait_until`)."""
        return wait_until(predicate, timeout)

    def wait_events(self, job_id: str, count: int, timeout: float = HANG) -> list[ScheduleArrivedEvent]:
        assert self.wait_for(lambda: len(self.events_for(job_id)) >= count, timeout), (
            f"expected {count} events for {job_id}, got {len(self.events_for(job_id))}: {self.job(job_id)}"
        )
        return self.events_for(job_id)

    def wait_status(self, job_id: str, *statuses: str, timeout: float = HANG) -> ScheduledJob:
        assert self.wait_for(lambda: self.job(job_id).status in statuses, timeout), self.job(job_id)
        return self.job(job_id)

    def settle(self, timeout: float = HANG) -> None:
        """Wait until the running worker has been through everything that was due before now.

        A marker one-shot due at once is scheduled and waited for: the worker claims in due order, so
        once the marker has fired and completed, every occurrence due before it has been claimed
        too. Tests that assert "nothing more happens" (no second fire, no late duplicate) settle
        first instead of sleeping for a while; the marker's events stay out of :attr:`events`.
        """
        soon = datetime.now(UTC) + timedelta(milliseconds=20)  # "now", past the service's check
        spec = OneShotSpec(topic=MARKER_TOPIC, run_at=soon, timezone="UTC")
        marker = self.container.schedule_service().schedule_at(spec)
        self.wait_status(marker.id, "completed", timeout=timeout)  # fired here or by another worker

    def wait_past(self, instant: datetime, timeout: float = HANG) -> None:
        """Wait until the wall clock has passed ``instant`` (e.g. a job has fallen due)."""
        assert wait_until(lambda: datetime.now(UTC) > instant, timeout), f"{instant} never passed"

    def job(self, job_id: str) -> ScheduledJob:
        job = self.service.get_by_id(job_id)
        assert job is not None, job_id
        return job

    def close(self) -> None:
        self.worker.stop()
        if self._async is not None:
            self._async.close()
        self.container.shutdown_resources()
