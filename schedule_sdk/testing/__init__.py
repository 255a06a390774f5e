"""Test your listeners without servers: a fake clock, an in-memory store, an inline substrate and a
publisher that records every event.

::

    from datetime import timedelta
    from schedule_sdk import ListenerRegistry, OneShotSpec, SCHEDULE_ARRIVED_EVENT
    from schedule_sdk.testing import make_test_kit

    def test_reminder_is_sent():
        registry = ListenerRegistry()
        sent = []
        registry.connect(SCHEDULE_ARRIVED_EVENT, lambda event: sent.append(event.user_payload))
        kit = make_test_kit(registry)
        kit.service.schedule_at(OneShotSpec(topic="reminder", run_at=kit.clock.now() + timedelta(hours=1),
                                            timezone="Europe/Paris", payload={"to": "ana"}))
        kit.run_due(until=timedelta(hours=1))
        assert sent == [{"to": "ana"}]

``kit.service`` is the real :class:`~schedule_sdk.ScheduleService` and fires go through the real
fire path (:class:`~schedule_sdk.core.firing.Firing`): validation, retries with backoff, repeats,
cancel and reschedule behave exactly as in production. Nothing runs in the background: a fire
happens only inside ``kit.run_due()``, in the calling thread. The kit is a
:class:`~schedule_sdk.ScheduleContainer` with its clock, store, queue, publisher and listeners
overridden (:func:`kit_container`; ``kit.container``), so every other part is the production one.

The port contract suites an adapter must pass are in :mod:`schedule_sdk.testing.contracts`;
:class:`MemoryTimerStore` is an in-memory timer store for the timer's tests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import cast

from schedule_sdk.adapters.memory import MemoryJobStore
from schedule_sdk.bootstrap.container import ScheduleContainer
from schedule_sdk.bootstrap.injector import providers
from schedule_sdk.bootstrap.settings import Settings
from schedule_sdk.core.firing import Firing
from schedule_sdk.core.listeners import ListenerRegistry
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.core.unobserved import NoMetrics
from schedule_sdk.domain.errors import ListenerFailed
from schedule_sdk.domain.events import ScheduleArrivedEvent, ScheduleFailedEvent, ScheduleMissedEvent
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.timing import ensure_aware
from schedule_sdk.ports import Clock, EventPublisher, FireResult
from schedule_sdk.substrates.inline import InlineExecutionQueue, InlineRunner
from schedule_sdk.testing.timers import MemoryTimerStore

__all__ = [
    "FakeClock",
    "InlineExecutionQueue",
    "InlineRunner",
    "MemoryJobStore",
    "MemoryTimerStore",
    "RecordingPublisher",
    "ScheduleTestKit",
    "make_test_kit",
    "kit_container",
]


def _seconds(by: timedelta | float) -> timedelta:
    return by if isinstance(by, timedelta) else timedelta(seconds=by)


class FakeClock(Clock):
    """A clock that moves only when told to. Thread-safe; always aware UTC."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = datetime.now(UTC) if start is None else ensure_aware(start, "start")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, by: timedelta | float) -> datetime:
        """Move forward by ``by`` (a timedelta, or seconds); return the new now."""
        step = _seconds(by)
        if step < timedelta(0):
            raise ValueError("a clock cannot advance by a negative amount; use set()")
        with self._lock:
            self._now += step
            return self._now

    def set(self, when: datetime) -> datetime:
        """Jump to ``when`` (an aware datetime; backwards too); return it as UTC."""
        when = ensure_aware(when, "when")
        with self._lock:
            self._now = when
            return when


class RecordingPublisher(EventPublisher):
    """Records every published event in :attr:`events`; optionally runs a registry's listeners.

    Tell it to fail with :meth:`fail_next` to test retries without writing a failing listener.
    """

    def __init__(self, registry: ListenerRegistry | None = None) -> None:
        self.registry = registry
        self.events: list[ScheduleArrivedEvent] = []
        #: Every ``schedule.missed`` event (occurrences a misfire policy skipped or coalesced, or
        #: an overlap policy did not fire).
        self.missed: list[ScheduleMissedEvent] = []
        self.failed: list[ScheduleFailedEvent] = []
        self._lock = threading.Lock()
        self._failures: list[BaseException] = []
        self._fail_always: BaseException | None = None

    def fail_next(self, times: int = 1, error: BaseException | None = None) -> None:
        """Make the next ``times`` publishes fail (as if a listener raised ``error``)."""
        with self._lock:
            self._failures.extend([error or RuntimeError("RecordingPublisher told to fail")] * times)

    def fail_always(self, error: BaseException | None = None) -> None:
        """Make every publish fail until :meth:`stop_failing`."""
        with self._lock:
            self._fail_always = error or RuntimeError("RecordingPublisher told to fail")

    def stop_failing(self) -> None:
        with self._lock:
            self._failures.clear()
            self._fail_always = None

    def publish(self, event: ScheduleArrivedEvent) -> int | None:
        """Record ``event``; with a registry, return how many of its listeners ran (0: the fire
        is ``unheard``), else None (the recorder heard it)."""
        with self._lock:
            self.events.append(event)
            error = self._failures.pop(0) if self._failures else self._fail_always
        if error is not None:
            raise error if isinstance(error, ListenerFailed) else ListenerFailed([error])
        if self.registry is not None:
            return self.registry.deliver(event)
        return None

    def publish_missed(self, event: ScheduleMissedEvent) -> None:
        with self._lock:
            self.missed.append(event)
        if self.registry is not None:
            self.registry.deliver(event)

    def publish_failed(self, event: ScheduleFailedEvent) -> None:
        """Record ``event`` (in :attr:`failed`); with a registry, deliver it."""
        with self._lock:
            self.failed.append(event)
        if self.registry is not None:
            self.registry.deliver(event)

    def events_for(self, job_id: str) -> list[ScheduleArrivedEvent]:
        with self._lock:
            return [e for e in self.events if e.scheduled_job_id == job_id]

    def clear(self) -> None:
        with self._lock:
            self.events.clear()
            self.missed.clear()
            self.failed.clear()


@dataclass(eq=False)
class ScheduleTestKit:
    """A real :class:`ScheduleService` on in-memory parts; see :func:`make_test_kit`."""

    service: ScheduleService
    clock: FakeClock
    store: MemoryJobStore
    queue: InlineExecutionQueue
    publisher: RecordingPublisher
    firing: Firing
    runner: InlineRunner
    registry: ListenerRegistry
    #: ``run_due`` refuses to fire more than this many times in one call (a runaway repeat).
    max_fires: int = field(default=10_000)
    #: The container the kit's parts come from (:func:`kit_container`).
    container: ScheduleContainer | None = None

    @property
    def events(self) -> list[ScheduleArrivedEvent]:
        """Every event published so far (failed attempts included)."""
        return self.publisher.events

    def job(self, job_id: str) -> ScheduledJob:
        """The stored job (``AssertionError`` if there is none)."""
        job = self.service.get_by_id(job_id)
        assert job is not None, f"no job {job_id}"
        return job

    def run_due(self, until: datetime | timedelta | float | None = None) -> list[FireResult]:
        """Fire what is due now. With ``until`` (an instant, or a duration from now), also move the
        clock forward to each later due time up to ``until``, firing as a worker running all that
        time would, and leave the clock at ``until``. Return the fires, in order, without those of
        notices (the rows delivering ``schedule.failed`` events, which fire too: their listeners run
        and :attr:`publisher` records them in ``failed``)."""
        results = self._run_now()
        if until is None:
            return results
        target = until if isinstance(until, datetime) else self.clock.now() + _seconds(until)
        target = ensure_aware(target, "until")
        while (due := self.store.next_due_at(self.clock.now())) is not None and due <= target:
            self.clock.set(max(due, self.clock.now()))
            results += self._run_now(len(results))
        if target > self.clock.now():
            self.clock.set(target)
        return results

    def _run_now(self, fired: int = 0) -> list[FireResult]:
        results = self.runner.run_due()
        if fired + len(results) > self.max_fires:
            raise RuntimeError(f"run_due fired more than {self.max_fires} times; is a repeat too frequent?")
        return [r for r in results if r.claimed.notice is None]


def kit_container(
    registry: ListenerRegistry | None = None,
    clock: Clock | None = None,
    *,
    max_payload_bytes: int = 65_536,
) -> ScheduleContainer:
    """A :class:`~schedule_sdk.ScheduleContainer` for tests: a fake clock (``clock``, default a
    new :class:`FakeClock`), an in-memory store, the inline substrate, a
    :class:`RecordingPublisher` running ``registry``'s listeners (default: a new, empty registry)
    and no metrics; settings from the arguments only (the environment is not read). Nothing
    connects; every provider not named here is the production one."""
    container = ScheduleContainer()
    settings = Settings.load({"max_payload_bytes": max_payload_bytes}, environ={})
    container.settings.override(providers.Object(settings))
    container.clock.override(providers.Object(clock if clock is not None else FakeClock()))
    container.listeners.override(providers.Object(registry if registry is not None else ListenerRegistry()))
    container.store.override(providers.ThreadSafeSingleton(MemoryJobStore))
    container.queue.override(providers.ThreadSafeSingleton(InlineExecutionQueue))
    container.publisher.override(
        providers.ThreadSafeSingleton(RecordingPublisher, registry=container.listeners)
    )
    container.metrics.override(providers.ThreadSafeSingleton(NoMetrics))
    return container


def make_test_kit(
    registry: ListenerRegistry | None = None,
    start: datetime | None = None,
    *,
    listeners: Iterable[object] = (),
    max_payload_bytes: int = 65_536,
) -> ScheduleTestKit:
    """A service on a fake clock, an in-memory store and the inline substrate (the providers of
    :func:`kit_container`).

    ``registry``: whose listeners run on each fire (default: a new, empty one).
    ``listeners``: modules, objects or ``@on_event`` functions to register in it (see
    :meth:`~schedule_sdk.ListenerRegistry.register`), e.g. ``listeners=[myapp.listeners]``.
    ``start``: the fake clock's first instant (default: the real now).
    """
    registry = registry if registry is not None else ListenerRegistry()
    for target in listeners:
        registry.register(target)
    clock = FakeClock(start)
    container = kit_container(registry, clock, max_payload_bytes=max_payload_bytes)
    store = cast(MemoryJobStore, container.store())
    queue = cast(InlineExecutionQueue, container.queue())
    firing: Firing = container.firing()
    return ScheduleTestKit(
        service=container.schedule_service(),
        clock=clock,
        store=store,
        queue=queue,
        publisher=cast(RecordingPublisher, container.publisher()),
        firing=firing,
        runner=InlineRunner(store=store, queue=queue, firing=firing, clock=clock),
        registry=registry,
        container=container,
    )
