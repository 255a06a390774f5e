"""schedule_sdk: durable scheduled jobs and multi-tenant timers.

Inject :class:`ScheduleService` (from :class:`ScheduleContainer`), schedule jobs with
``schedule_at`` / ``schedule_repeat``, and receive ``schedule.arrived`` events in ``@on_event``
listeners — at least once, across crashes and restarts.
"""

from __future__ import annotations

from typing import Any as _Any

from schedule_sdk import errors as _errors
from schedule_sdk.aio.service import AsyncScheduleService
from schedule_sdk.bootstrap.container import ScheduleContainer
from schedule_sdk.bootstrap.settings import Settings
from schedule_sdk.core.declared import DeclaredSchedules, DeclaredSync, after, cron, every
from schedule_sdk.core.listeners import ListenerRegistry, on_event
from schedule_sdk.core.reconciler import ReconcileReport
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.core.worker import ScheduleWorker
from schedule_sdk.domain.calendars import Calendar, HolidaySpec
from schedule_sdk.domain.declared import Declaration, Plan, PlanItem
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.events import (
    SCHEDULE_ARRIVED_EVENT,
    SCHEDULE_MISSED_EVENT,
    MissedReason,
    ScheduleArrivedEvent,
    ScheduleMissedEvent,
    schedule_arrived_event_name,
    schedule_missed_event_name,
)
from schedule_sdk.domain.history import FireOutcome, FireRecord
from schedule_sdk.domain.jobs import (
    Backoff,
    ConcurrencyLimit,
    CronRepeat,
    IntervalRepeat,
    JobMetadata,
    JobPage,
    MisfirePolicy,
    OneShotSpec,
    RepeatSpec,
    RetryPolicy,
    ScheduledJob,
)
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.timing import FireTime
from schedule_sdk.domain.upcoming import UpcomingFire

_ERRORS = frozenset(_errors.__all__)


def __getattr__(name: str) -> _Any:
    """The error classes, importable from the top as before (their home is :mod:`schedule_sdk.errors`)."""
    if name in _ERRORS:
        return getattr(_errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SCHEDULE_ARRIVED_EVENT",
    "SCHEDULE_MISSED_EVENT",
    "AsyncScheduleService",
    "Backoff",
    "Calendar",
    "ConcurrencyLimit",
    "CronRepeat",
    "Declaration",
    "DeclaredSchedules",
    "DeclaredSync",
    "FireOutcome",
    "FireRecord",
    "FireTime",
    "HolidaySpec",
    "IntervalRepeat",
    "JobMetadata",
    "JobPage",
    "JobStatus",
    "ListenerRegistry",
    "MisfirePolicy",
    "MissedReason",
    "OneShotSpec",
    "Plan",
    "PlanItem",
    "ReconcileReport",
    "RepeatSpec",
    "RetryPolicy",
    "ScheduleArrivedEvent",
    "ScheduleContainer",
    "ScheduleError",
    "ScheduleMissedEvent",
    "ScheduleService",
    "ScheduleWorker",
    "ScheduledJob",
    "Settings",
    "UpcomingFire",
    "after",
    "cron",
    "every",
    "on_event",
    "schedule_arrived_event_name",
    "schedule_missed_event_name",
]
