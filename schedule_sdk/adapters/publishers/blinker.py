"""``BlinkerEventPublisher``: delivers arrived, missed and failed events to in-process listeners."""

from __future__ import annotations

from schedule_sdk.domain.events import ScheduleArrivedEvent, ScheduleFailedEvent, ScheduleMissedEvent
from schedule_sdk.ports import EventPublisher, Listeners


class BlinkerEventPublisher(EventPublisher):
    """In-process delivery (the default). Listeners run on the worker's listener threads, through
    the registry's delivery (each isolated; ``async def`` ones on its listener loop)."""

    def __init__(self, registry: Listeners) -> None:
        self.registry = registry

    def publish(self, event: ScheduleArrivedEvent) -> int:
        return self.registry.deliver(event)

    def publish_missed(self, event: ScheduleMissedEvent) -> None:
        self.registry.deliver(event)

    def publish_failed(self, event: ScheduleFailedEvent) -> None:
        self.registry.deliver(event)
