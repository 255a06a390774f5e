"""Durable multi-tenant timers (ADR-0003): ``ScheduleTimer`` in, ``DueTimeReached`` out, on the
Schedule core, in-process or over NATS JetStream. See ``docs/explanation/timer.md``."""

from __future__ import annotations

from .app import Timer
from .domain import (
    DUE_TIME_REACHED,
    TIMER_TOPIC,
    DueTimeReached,
    Envelope,
    ScheduleTimer,
    TimerEntry,
    TimerOutcome,
    TimerState,
)
from .inprocess import InProcessBus, InProcessCommandSource
from .metrics import InMemoryMetrics, PrometheusMetrics
from .service import TimerQueries, TimerService
from .settings import TimerSettings

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
    "TimerEntry",
    "TimerOutcome",
    "TimerQueries",
    "TimerService",
    "TimerSettings",
    "TimerState",
]
