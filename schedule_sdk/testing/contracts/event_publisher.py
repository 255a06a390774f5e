"""The :class:`~schedule_sdk.ports.EventPublisher` contract, as tests any publisher must pass.

::

    from schedule_sdk.testing.contracts.event_publisher import EventPublisherContract

    class TestMyPublisher(EventPublisherContract):
        def open_publisher(self, registry):
            return MyEventPublisher(registry=registry, ...)   # runs registry's listeners

The suite connects listeners to ``registry`` (a fresh :class:`~schedule_sdk.ListenerRegistry` per
test) and publishes events; the publisher is closed after each test. Set ``delivers_missed =
False`` for a publisher that drops ``schedule.missed`` events (the port's default). Needs pytest
only; no fixtures.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from schedule_sdk.core.listeners import ListenerRegistry
from schedule_sdk.domain.errors import ListenerFailed
from schedule_sdk.domain.events import (
    SCHEDULE_ARRIVED_EVENT,
    SCHEDULE_MISSED_EVENT,
    ScheduleArrivedEvent,
    ScheduleMissedEvent,
    schedule_arrived_event_name,
    schedule_missed_event_name,
)
from schedule_sdk.domain.ids import new_id
from schedule_sdk.domain.jobs import JobMetadata
from schedule_sdk.ports import EventPublisher
from schedule_sdk.testing.contracts.rows import NOW

TOPIC = "contract.publisher"


def arrived(**changes: Any) -> ScheduleArrivedEvent:
    values: dict[str, Any] = {
        "scheduled_job_id": new_id(),
        "topic": TOPIC,
        "user_payload": {"n": 1, "s": "é"},
        "metadata": JobMetadata(owner_id="o1", tenant_id="t1"),
        "timezone": "Europe/Paris",
        "scheduled_for": NOW,
        "fired_at": NOW + timedelta(milliseconds=3),
        "attempt": 2,
        "occurrence": 5,
    }
    values.update(changes)
    return ScheduleArrivedEvent(**values)


def missed() -> ScheduleMissedEvent:
    return ScheduleMissedEvent(
        scheduled_job_id=new_id(),
        topic=TOPIC,
        user_payload=None,
        metadata=JobMetadata(),
        timezone="UTC",
        policy="skip",
        missed=(NOW - timedelta(minutes=2), NOW - timedelta(minutes=1)),
        count=2,
        detected_at=NOW,
        reason="excluded",
    )


class EventPublisherContract:
    #: False: ``publish_missed`` drops events (the port's optional default).
    delivers_missed: bool = True
    registry: ListenerRegistry
    _publisher: EventPublisher | None = None

    @property
    def publisher(self) -> EventPublisher:
        if self._publisher is None:
            self._publisher = self.open_publisher(self.registry)
        return self._publisher

    def open_publisher(self, registry: ListenerRegistry) -> EventPublisher:
        raise NotImplementedError("a contract subclass returns its publisher from open_publisher()")

    def setup_method(self, method: object) -> None:
        self.registry = ListenerRegistry()
        self._publisher = None

    def teardown_method(self, method: object) -> None:
        if self._publisher is not None:
            self._publisher.close()
        self._publisher = None

    def test_publish_runs_the_listeners_of_both_names_once_each(self) -> None:
        seen: list[tuple[str, ScheduleArrivedEvent]] = []
        self.registry.connect(SCHEDULE_ARRIVED_EVENT, lambda e: seen.append(("all", e)))
        self.registry.connect(schedule_arrived_event_name(TOPIC), lambda e: seen.append(("topic", e)))
        self.registry.connect(schedule_arrived_event_name("other"), lambda e: seen.append(("other", e)))
        event = arrived()
        self.publisher.publish(event)
        assert sorted(name for name, _ in seen) == ["all", "topic"]
        assert all(e == event for _, e in seen)

    def test_every_listener_runs_even_if_one_raises_then_listener_failed(self) -> None:
        ran: list[str] = []

        def boom(event: ScheduleArrivedEvent) -> None:
            ran.append("boom")
            raise RuntimeError("the listener failed")

        self.registry.connect(SCHEDULE_ARRIVED_EVENT, boom)
        self.registry.connect(SCHEDULE_ARRIVED_EVENT, lambda e: ran.append("after"))
        self.registry.connect(schedule_arrived_event_name(TOPIC), lambda e: ran.append("topic"))
        with pytest.raises(ListenerFailed):
            self.publisher.publish(arrived())
        assert sorted(ran) == ["after", "boom", "topic"]

    def test_publish_with_no_listeners_succeeds(self) -> None:
        self.publisher.publish(arrived())

    def test_publish_missed_reaches_both_missed_names_or_nobody(self) -> None:
        seen: list[tuple[str, object]] = []
        self.registry.connect(SCHEDULE_MISSED_EVENT, lambda e: seen.append(("all", e)))
        self.registry.connect(schedule_missed_event_name(TOPIC), lambda e: seen.append(("topic", e)))
        self.registry.connect(SCHEDULE_ARRIVED_EVENT, lambda e: seen.append(("arrived", e)))
        event = missed()
        self.publisher.publish_missed(event)
        assert sorted(name for name, _ in seen) == (["all", "topic"] if self.delivers_missed else [])
        assert all(e == event for _, e in seen)  # every field, the reason included
