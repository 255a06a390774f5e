"""``@on_event`` and the registry that maps event names to listeners.

``@on_event`` only *marks* a function or method; nothing is registered at import time and nothing
is process-wide. Each :class:`~schedule_sdk.ScheduleContainer` owns one :class:`ListenerRegistry`
(``container.listeners()``), which binds the marked functions of the modules named in its
``listener_modules`` setting (``SCHEDULE_LISTENER_MODULES``) when it is first built. Bind more
with ``container.listeners().register(target)``, where ``target`` is a marked function, an
object with marked methods, a module, or a module's dotted name.

Listeners are held by strong references, so a lambda or a temporary object never vanishes
silently (blinker's default of weak references would drop them); ``unregister`` removes them.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import threading
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, TypeVar

import blinker

from schedule_sdk.core.loop import ListenerLoop, time_left
from schedule_sdk.domain.errors import ListenerFailed, ListenerTimedOut
from schedule_sdk.domain.events import ScheduleEvent
from schedule_sdk.ports import Listeners

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__schedule_sdk_events__"


def on_event(*names: str) -> Callable[[F], F]:
    """Subscribe the decorated function or method to the named events.

    ``@on_event(SCHEDULE_ARRIVED_EVENT)`` receives every fire; ``@on_event(schedule_arrived_event_name(t))``
    only fires of topic ``t``. ``async def`` listeners are supported. The decorator only marks the
    function: it runs for the containers it is registered with (see the module docstring).
    """
    if not names or not all(isinstance(n, str) and n for n in names):
        raise TypeError("on_event needs at least one event name")

    def decorate(fn: F) -> F:
        setattr(fn, _MARK, (*getattr(fn, _MARK, ()), *names))
        return fn

    return decorate


class ListenerRegistry(Listeners):
    """Event name → listeners, on a private blinker namespace (never the process-global one), and
    their delivery: each listener isolated from the others, ``async def`` ones on :attr:`loop`."""

    def __init__(self, loop: ListenerLoop | None = None) -> None:
        self._namespace = blinker.Namespace()
        self._lock = threading.Lock()  # for changes; a fire reads the snapshot without it
        #: Event name → its listeners, replaced whole (never changed in place) after each change:
        #: every listener thread looks its listeners up on every fire, and a lock there made
        #: them queue behind one another (a thread losing the GIL while holding it).
        self._snapshot: dict[str, tuple[Callable[..., Any], ...]] = {}
        #: Where ``async def`` listeners run: the container's listener loop, or one of this
        #: registry's own (started on first use), never one shared by the process.
        self.loop = loop if loop is not None else ListenerLoop()

    def connect(self, name: str, listener: Callable[..., Any]) -> None:
        with self._lock:
            self._namespace.signal(name).connect(listener, weak=False)
            self._publish_snapshot()

    def disconnect(self, name: str, listener: Callable[..., Any]) -> None:
        with self._lock:
            self._namespace.signal(name).disconnect(listener)
            self._publish_snapshot()

    def _publish_snapshot(self) -> None:
        """Rebuild the lookup table fires read (under ``_lock``, after a change)."""
        self._snapshot = {
            name: tuple(signal.receivers_for(blinker.ANY)) for name, signal in self._namespace.items()
        }

    @classmethod
    def of_modules(
        cls, modules: Iterable[str | ModuleType] = (), loop: ListenerLoop | None = None
    ) -> ListenerRegistry:
        """A registry holding the ``@on_event`` functions of ``modules`` (imported if named).

        :raises ImportError: a named module cannot be imported.
        """
        registry = cls(loop)
        for module in modules:
            registry.register(module)
        return registry

    def register(self, target: object) -> object:
        """Connect ``target``'s ``@on_event`` listeners: ``target`` itself if it is a marked
        function, the marked methods of an object, or the marked functions of a module (given as
        a module or its dotted name, which is imported). Registering twice is harmless."""
        for name, fn in _marked(target):
            self.connect(name, fn)
        return target

    def unregister(self, target: object) -> None:
        for name, fn in _marked(target):
            self.disconnect(name, fn)

    def listeners(self, name: str) -> list[Callable[..., Any]]:
        return list(self._snapshot.get(name, ()))

    def count(self) -> int:
        """How many listeners are bound, over every event name."""
        with self._lock:
            return sum(len(signal.receivers) for signal in self._namespace.values())

    def deliver(self, event: ScheduleEvent) -> int:
        """Run every listener of both event names, each isolated from the others; return how many ran.

        :raises ListenerFailed: after all listeners ran, if any of them raised.
        """
        errors: list[BaseException] = []
        ran = 0
        snapshot = self._snapshot
        for name in event.names:
            for listener in snapshot.get(name, ()):
                ran += 1
                try:
                    self.call(listener, event)
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
        return ran

    def call(self, listener: Callable[..., Any], event: ScheduleEvent) -> None:
        """Call one listener; an ``async def`` listener runs to completion on :attr:`loop` (the
        app's loop or one long-lived loop, see :class:`~schedule_sdk.core.loop.ListenerLoop`)
        while this thread waits.

        :raises ListenerTimedOut: the fire's time limit (:func:`~schedule_sdk.core.loop.fire_deadline`)
            is over: the listener is not called, or (``async def``) it was cancelled at the limit.
        """
        left = time_left()
        if left is not None and left[0] <= 0:
            raise ListenerTimedOut(left[1])
        result = listener(event)
        if inspect.isawaitable(result):
            self.loop.run(_await(result))

    def clear(self) -> None:
        with self._lock:
            for signal in list(self._namespace.values()):
                signal.receivers.clear()
            self._publish_snapshot()


async def _await(awaitable: Any) -> None:
    await awaitable


def _marked(target: object) -> list[tuple[str, Callable[..., Any]]]:
    if isinstance(target, str):
        target = importlib.import_module(target)
    if callable(target) and hasattr(target, _MARK) and not inspect.isclass(target):
        return [(n, target) for n in getattr(target, _MARK)]
    found: list[tuple[str, Callable[..., Any]]] = []
    if isinstance(target, ModuleType):
        for member in list(vars(target).values()):
            if inspect.isfunction(member):
                found.extend((n, member) for n in getattr(member, _MARK, ()))
        return found
    for _, member in inspect.getmembers(target, inspect.ismethod):
        found.extend((n, member) for n in getattr(member.__func__, _MARK, ()))
    return found
