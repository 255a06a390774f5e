"""``@on_event`` and the registry that maps event names to listeners.

Plain functions decorated with ``@on_event`` register themselves in :data:`default_registry`
when their module is imported. Methods are only marked; register the object that owns them
with ``registry.register(obj)`` (the container's publisher uses :data:`default_registry`).

Listeners are held by strong references, so a lambda or a temporary object never vanishes
silently (blinker's default of weak references would drop them); ``unregister`` removes them.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import blinker

from .domain.events import ScheduleArrivedEvent

Listener = Callable[[ScheduleArrivedEvent], Awaitable[None] | None]
F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__schedule_sdk_events__"


def on_event(*names: str) -> Callable[[F], F]:
    """Subscribe the decorated function or method to the named events.

    ``@on_event(SCHEDULE_ARRIVED_EVENT)`` receives every fire; ``@on_event(schedule_arrived_event_name(t))``
    only fires of topic ``t``. ``async def`` listeners are supported.
    """
    if not names or not all(isinstance(n, str) and n for n in names):
        raise TypeError("on_event needs at least one event name")

    def decorate(fn: F) -> F:
        setattr(fn, _MARK, (*getattr(fn, _MARK, ()), *names))
        if not _defined_in_class(fn):
            for name in names:
                default_registry.connect(name, fn)
        return fn

    return decorate


def _defined_in_class(fn: Callable[..., Any]) -> bool:
    parts = getattr(fn, "__qualname__", "").split(".")
    return len(parts) > 1 and parts[-2] != "<locals>"


class ListenerRegistry:
    """Event name → listeners, on a private blinker namespace (never the process-global one)."""

    def __init__(self) -> None:
        self._namespace = blinker.Namespace()
        self._lock = threading.Lock()

    def connect(self, name: str, listener: Callable[..., Any]) -> None:
        with self._lock:
            self._namespace.signal(name).connect(listener, weak=False)

    def disconnect(self, name: str, listener: Callable[..., Any]) -> None:
        with self._lock:
            self._namespace.signal(name).disconnect(listener)

    def register(self, target: object) -> object:
        """Connect ``target``'s ``@on_event`` methods (or ``target`` itself, if it is a marked function)."""
        for name, fn in _marked(target):
            self.connect(name, fn)
        return target

    def unregister(self, target: object) -> None:
        for name, fn in _marked(target):
            self.disconnect(name, fn)

    def listeners(self, name: str) -> list[Callable[..., Any]]:
        with self._lock:
            if name not in self._namespace:
                return []
            signal = self._namespace[name]
            return list(signal.receivers_for(blinker.ANY))

    def clear(self) -> None:
        with self._lock:
            for signal in list(self._namespace.values()):
                signal.receivers.clear()


def _marked(target: object) -> list[tuple[str, Callable[..., Any]]]:
    if callable(target) and hasattr(target, _MARK) and not inspect.isclass(target):
        return [(n, target) for n in getattr(target, _MARK)]
    found: list[tuple[str, Callable[..., Any]]] = []
    for _, member in inspect.getmembers(target, inspect.ismethod):
        found.extend((n, member) for n in getattr(member.__func__, _MARK, ()))
    return found


#: Where ``@on_event`` plain functions register; the container's default publisher reads it.
default_registry = ListenerRegistry()
