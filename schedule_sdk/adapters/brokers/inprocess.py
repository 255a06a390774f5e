"""In-process adapters: commands by direct call, events to in-process subscribers (blinker)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from schedule_sdk.domain.errors import BrokerUnavailable, InvalidTimerCommand, ScheduleValidationError
from schedule_sdk.domain.timers import DUE_TIME_REACHED, Envelope, ScheduleTimer, TimerOutcome
from schedule_sdk.ports import CommandSink, CommandSource, MessageBus

logger = logging.getLogger(__name__)

Subscriber = Callable[[Envelope], Any]


class InProcessBus(MessageBus):
    """Delivers each envelope to every subscriber, synchronously, on the firing thread.

    A subscriber that raises fails the publish (after every subscriber ran), so the fire is
    retried: subscribers get at-least-once delivery and must be idempotent.
    """

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []  # strong references
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber(envelope)`` for every DueTimeReached; returns an unsubscribe function."""
        with self._lock:
            if subscriber not in self._subscribers:
                self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with self._lock:
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)

        return unsubscribe

    def publish(self, envelope: Envelope) -> None:
        failures = 0
        with self._lock:
            subscribers = list(self._subscribers) if envelope.type == DUE_TIME_REACHED else []
        for subscriber in subscribers:
            try:
                subscriber(envelope)
            except Exception:
                logger.exception("DueTimeReached subscriber %r failed for %s", subscriber, envelope.id)
                failures += 1
        if failures:
            raise BrokerUnavailable(f"{failures} DueTimeReached subscriber(s) failed")


class InProcessCommandSource(CommandSource):
    """Commands sent by direct call: :meth:`send` persists the command before it returns."""

    def __init__(self) -> None:
        self._sink: CommandSink | None = None

    def start(self, sink: CommandSink) -> None:
        self._sink = sink

    def stop(self) -> None:
        self._sink = None

    def send(self, command: ScheduleTimer | str | bytes) -> TimerOutcome:
        """Persist one command (a :class:`ScheduleTimer`, or its JSON).

        :raises InvalidTimerCommand: malformed or refused; nothing was written.
        :raises StoreUnavailable: nothing was written.
        """
        sink = self._sink
        if sink is None:
            raise RuntimeError("the timer is not started")
        if not isinstance(command, ScheduleTimer):
            raw = command
            try:
                command = ScheduleTimer.from_json(raw)
            except InvalidTimerCommand as error:
                sink.malformed(error, raw)
                raise
        (result,) = sink.handle_each([command])
        if isinstance(result, ScheduleValidationError):
            raise result
        assert isinstance(result, TimerOutcome)
        return result
