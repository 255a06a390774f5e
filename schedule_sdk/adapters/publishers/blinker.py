"""``BlinkerEventPublisher``: delivers arrived and missed events to in-process ``@on_event`` listeners."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from schedule_sdk.core.listeners import ListenerRegistry
from schedule_sdk.core.loop import ListenerLoop, shared_loop
from schedule_sdk.domain.errors import ListenerFailed
from schedule_sdk.domain.events import (
    ScheduleArrivedEvent,
    ScheduleEvent,
    ScheduleMissedEvent,
)
from schedule_sdk.ports import EventPublisher

logger = logging.getLogger(__name__)


def call_listener(
    listener: Callable[..., Any], event: ScheduleEvent, loop: ListenerLoop | None = None
) -> None:
    """Call one listener; an ``async def`` listener runs to completion on ``loop`` (the app's loop
    or one long-lived loop, see :class:`~schedule_sdk.core.loop.ListenerLoop`) while this
    thread waits."""
    result = listener(event)
    if inspect.isawaitable(result):
        (loop or shared_loop).run(_await(result))


async def _await(awaitable: Any) -> None:
    await awaitable


def deliver(registry: ListenerRegistry, event: ScheduleEvent, loop: ListenerLoop | None = None) -> None:
    """Run every listener of both event names, each isolated from the others (async ones on ``loop``).

    :raises ListenerFailed: after all listeners ran, if any of them raised.
    """
    errors: list[BaseException] = []
    for name in event.names:
        for listener in registry.listeners(name):
            try:
                call_listener(listener, event, loop)
            except Exception as error:
                logger.exception(
                    "listener %s failed for job %s",
                    getattr(listener, "__qualname__", listener),
                    event.scheduled_job_id,
                    extra={
                        "job_id": event.scheduled_job_id,
                        "occurrence": getattr(event, "occurrence", None),
                        "attempt": getattr(event, "attempt", None),
                        "topic": event.topic,
                        "event": name,
                    },
                )
                errors.append(error)
    if errors:
        raise ListenerFailed(errors)


class BlinkerEventPublisher(EventPublisher):
    """In-process delivery (the default). Listeners run on the worker's listener threads."""

    def __init__(self, registry: ListenerRegistry | None = None, loop: ListenerLoop | None = None) -> None:
        self.registry = registry if registry is not None else ListenerRegistry()
        #: Where ``async def`` listeners run (a worker started from async code attaches the app's loop).
        self.loop = loop if loop is not None else shared_loop

    def publish(self, event: ScheduleArrivedEvent) -> None:
        deliver(self.registry, event, self.loop)

    def publish_missed(self, event: ScheduleMissedEvent) -> None:
        deliver(self.registry, event, self.loop)
