"""schedule_sdk: durable scheduled jobs and multi-tenant timers.

Inject :class:`ScheduleService` (from :class:`ScheduleContainer`), schedule jobs with
``schedule_at`` / ``schedule_repeat``, and receive ``schedule.arrived`` events in ``@on_event``
listeners — at least once, across crashes and restarts.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING
from typing import Any as _Any

if TYPE_CHECKING:
    from schedule_sdk.aio.service import AsyncScheduleService
    from schedule_sdk.bootstrap.container import ScheduleContainer
    from schedule_sdk.bootstrap.settings import Settings
    from schedule_sdk.core.declared import (
        DeclaredSchedules,
        DeclaredSync,
        after,
        cron,
        every,
    )
    from schedule_sdk.core.listeners import ListenerRegistry, on_event
    from schedule_sdk.core.reconciler import ReconcileReport
    from schedule_sdk.core.service import ScheduleService
    from schedule_sdk.core.worker import ScheduleWorker
    from schedule_sdk.domain.calendars import Calendar, HolidaySpec
    from schedule_sdk.domain.declared import Declaration, Plan, PlanItem
    from schedule_sdk.domain.errors import ScheduleError
    from schedule_sdk.domain.events import (
        SCHEDULE_ARRIVED_EVENT,
        SCHEDULE_FAILED_EVENT,
        SCHEDULE_MISSED_EVENT,
        MissedReason,
        ScheduleArrivedEvent,
        ScheduleFailedEvent,
        ScheduleMissedEvent,
        schedule_arrived_event_name,
        schedule_failed_event_name,
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
    from schedule_sdk.domain.upcoming import UpcomingFire, UpcomingGroup, UpcomingGroups, UpcomingPage

#: Where each public name lives. A name is imported from its home module on first use (PEP 562),
#: so ``import schedule_sdk`` loads neither the SQL store, the container nor any web framework.
_HOMES = {
    "AsyncScheduleService": "schedule_sdk.aio.service",
    "Backoff": "schedule_sdk.domain.jobs",
    "Calendar": "schedule_sdk.domain.calendars",
    "ConcurrencyLimit": "schedule_sdk.domain.jobs",
    "CronRepeat": "schedule_sdk.domain.jobs",
    "Declaration": "schedule_sdk.domain.declared",
    "DeclaredSchedules": "schedule_sdk.core.declared",
    "DeclaredSync": "schedule_sdk.core.declared",
    "FireOutcome": "schedule_sdk.domain.history",
    "FireRecord": "schedule_sdk.domain.history",
    "FireTime": "schedule_sdk.domain.timing",
    "HolidaySpec": "schedule_sdk.domain.calendars",
    "IntervalRepeat": "schedule_sdk.domain.jobs",
    "JobMetadata": "schedule_sdk.domain.jobs",
    "JobPage": "schedule_sdk.domain.jobs",
    "JobStatus": "schedule_sdk.domain.status",
    "ListenerRegistry": "schedule_sdk.core.listeners",
    "MisfirePolicy": "schedule_sdk.domain.jobs",
    "MissedReason": "schedule_sdk.domain.events",
    "OneShotSpec": "schedule_sdk.domain.jobs",
    "Plan": "schedule_sdk.domain.declared",
    "PlanItem": "schedule_sdk.domain.declared",
    "ReconcileReport": "schedule_sdk.core.reconciler",
    "RepeatSpec": "schedule_sdk.domain.jobs",
    "RetryPolicy": "schedule_sdk.domain.jobs",
    "SCHEDULE_ARRIVED_EVENT": "schedule_sdk.domain.events",
    "SCHEDULE_FAILED_EVENT": "schedule_sdk.domain.events",
    "SCHEDULE_MISSED_EVENT": "schedule_sdk.domain.events",
    "ScheduleArrivedEvent": "schedule_sdk.domain.events",
    "ScheduleContainer": "schedule_sdk.bootstrap.container",
    "ScheduleError": "schedule_sdk.domain.errors",
    "ScheduleFailedEvent": "schedule_sdk.domain.events",
    "ScheduleMissedEvent": "schedule_sdk.domain.events",
    "ScheduleService": "schedule_sdk.core.service",
    "ScheduleWorker": "schedule_sdk.core.worker",
    "ScheduledJob": "schedule_sdk.domain.jobs",
    "Settings": "schedule_sdk.bootstrap.settings",
    "UpcomingFire": "schedule_sdk.domain.upcoming",
    "UpcomingGroup": "schedule_sdk.domain.upcoming",
    "UpcomingGroups": "schedule_sdk.domain.upcoming",
    "UpcomingPage": "schedule_sdk.domain.upcoming",
    "after": "schedule_sdk.core.declared",
    "cron": "schedule_sdk.core.declared",
    "every": "schedule_sdk.core.declared",
    "on_event": "schedule_sdk.core.listeners",
    "schedule_arrived_event_name": "schedule_sdk.domain.events",
    "schedule_failed_event_name": "schedule_sdk.domain.events",
    "schedule_missed_event_name": "schedule_sdk.domain.events",
}
#: The sub-packages an attribute access imports on first use, as the eager face once loaded them.
_SUBPACKAGES = frozenset({"adapters", "aio", "bootstrap", "core", "domain", "errors", "ports", "substrates"})


def _errors() -> frozenset[str]:
    names: list[str] = _importlib.import_module("schedule_sdk.errors").__all__
    return frozenset(names)


def __getattr__(name: str) -> _Any:
    """A public name, imported from its home on first use; also the error classes, importable from
    the top as before (their home is :mod:`schedule_sdk.errors`)."""
    if name in _SUBPACKAGES:
        return _importlib.import_module(f"{__name__}.{name}")
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(_importlib.import_module(home), name)
        globals()[name] = value
        return value
    if not name.startswith("__") and name in _errors():
        return getattr(_importlib.import_module("schedule_sdk.errors"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names and the sub-packages (the error classes are listed by :mod:`schedule_sdk.errors`)."""
    return sorted((set(globals()) - {"TYPE_CHECKING"}) | set(__all__) | _SUBPACKAGES)


__all__ = [
    "SCHEDULE_ARRIVED_EVENT",
    "SCHEDULE_FAILED_EVENT",
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
    "ScheduleFailedEvent",
    "ScheduleMissedEvent",
    "ScheduleService",
    "ScheduleWorker",
    "ScheduledJob",
    "Settings",
    "UpcomingFire",
    "UpcomingGroup",
    "UpcomingGroups",
    "UpcomingPage",
    "after",
    "cron",
    "every",
    "on_event",
    "schedule_arrived_event_name",
    "schedule_failed_event_name",
    "schedule_missed_event_name",
]
