"""A container wired for one test: its own listener registry, an event recorder, wait helpers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    ListenerRegistry,
    ScheduleArrivedEvent,
    ScheduleContainer,
    ScheduledJob,
    ScheduleService,
    ScheduleWorker,
)
from schedule_sdk.ports import JobStore


class Harness:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.container = ScheduleContainer()
        self.container.config.from_dict(settings)
        self.registry: ListenerRegistry = self.container.listeners()
        self.events: list[ScheduleArrivedEvent] = []
        self._changed = threading.Condition()
        self.registry.connect(SCHEDULE_ARRIVED_EVENT, self._record)

    def _record(self, event: ScheduleArrivedEvent) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    @property
    def service(self) -> ScheduleService:
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

    def listen(self, name: str, fn: Callable[[ScheduleArrivedEvent], Any]) -> None:
        self.registry.connect(name, fn)

    def events_for(self, job_id: str) -> list[ScheduleArrivedEvent]:
        with self._changed:
            return [e for e in self.events if e.scheduled_job_id == job_id]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
        """Wait until ``predicate()`` holds (re-checked on each event and every 50 ms)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.05))
        return True

    def wait_events(self, job_id: str, count: int, timeout: float = 15.0) -> list[ScheduleArrivedEvent]:
        assert self.wait_for(lambda: len(self.events_for(job_id)) >= count, timeout), (
            f"expected {count} events for {job_id}, got {len(self.events_for(job_id))}: {self.job(job_id)}"
        )
        return self.events_for(job_id)

    def wait_status(self, job_id: str, *statuses: str, timeout: float = 15.0) -> ScheduledJob:
        assert self.wait_for(lambda: self.job(job_id).status in statuses, timeout), self.job(job_id)
        return self.job(job_id)

    def job(self, job_id: str) -> ScheduledJob:
        job = self.service.get_by_id(job_id)
        assert job is not None, job_id
        return job

    def close(self) -> None:
        self.worker.stop()
        self.container.shutdown_resources()
