"""Durable multi-tenant timers: ``ScheduleTimer`` in, ``DueTimeReached`` out, on the Schedule
core, in-process or over NATS JetStream. See ``docs/explanation/timer.md``.

:class:`Timer` and the adapters re-exported here (which live under ``schedule_sdk.adapters``) are
imported on first use, so an adapter module can import this package's ports and domain.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from schedule_sdk.bootstrap.timer_settings import TimerSettings
from schedule_sdk.core.timers import TimerQueries, TimerService
from schedule_sdk.domain.timers import (
    DUE_TIME_REACHED,
    TIMER_TOPIC,
    DueTimeReached,
    Envelope,
    ScheduleTimer,
    TimerEntry,
    TimerOutcome,
    TimerState,
)

if TYPE_CHECKING:
    from schedule_sdk.adapters.brokers.inprocess import InProcessBus, InProcessCommandSource
    from schedule_sdk.adapters.metrics import InMemoryMetrics, PrometheusMetrics
    from schedule_sdk.bootstrap.timer import Timer, TimerContainer

_LAZY = {
    "InMemoryMetrics": "schedule_sdk.adapters.metrics",
    "InProcessBus": "schedule_sdk.adapters.brokers.inprocess",
    "InProcessCommandSource": "schedule_sdk.adapters.brokers.inprocess",
    "PrometheusMetrics": "schedule_sdk.adapters.metrics",
    "Timer": "schedule_sdk.bootstrap.timer",
    "TimerContainer": "schedule_sdk.bootstrap.timer",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DUE_TIME_REACHED",
    "TIMER_TOPIC",
    "DueTimeReached",
    "Envelope",
    "InMemoryMetrics",
    "InProcessBus",
    "InProcessCommandSource",
    "PrometheusMetrics",
    "ScheduleTimer",
    "Timer",
    "TimerContainer",
    "TimerEntry",
    "TimerOutcome",
    "TimerQueries",
    "TimerService",
    "TimerSettings",
    "TimerState",
]
