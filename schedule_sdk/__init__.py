"""schedule_sdk: durable scheduled jobs and multi-tenant timers.

Inject :class:`ScheduleService` (from :class:`ScheduleContainer`), schedule jobs with
``schedule_at`` / ``schedule_repeat``, and receive ``schedule.arrived`` events in ``@on_event``
listeners — at least once, across crashes and restarts.
"""

from __future__ import annotations

from .async_service import AsyncScheduleService
from .container import ScheduleContainer
from .domain.errors import (
    BrokerUnavailable,
    ClientRequestIdInUse,
    InvalidCron,
    InvalidCursor,
    InvalidInterval,
    InvalidMetadata,
    InvalidPayload,
    InvalidRepeat,
    InvalidRetry,
    InvalidSetting,
    InvalidTimerCommand,
    InvalidTimezone,
    InvalidTopic,
    InvalidTransition,
    JobNotFound,
    ListenerFailed,
    NaiveDatetime,
    NotReschedulable,
    QueueUnavailable,
    RunAtInPast,
    ScheduleError,
    ScheduleUnavailable,
    ScheduleValidationError,
    StoreUnavailable,
    TransactionNotJoinable,
)
from .domain.events import SCHEDULE_ARRIVED_EVENT, ScheduleArrivedEvent, schedule_arrived_event_name
from .domain.jobs import (
    Backoff,
    CronRepeat,
    IntervalRepeat,
    JobMetadata,
    JobPage,
    OneShotSpec,
    RepeatSpec,
    RetryPolicy,
    ScheduledJob,
)
from .domain.status import JobStatus
from .listeners import ListenerRegistry, on_event
from .reconciler import ReconcileReport
from .runtimes.worker import ScheduleWorker
from .service import ScheduleService
from .settings import Settings

__all__ = [
    "SCHEDULE_ARRIVED_EVENT",
    "AsyncScheduleService",
    "Backoff",
    "BrokerUnavailable",
    "ClientRequestIdInUse",
    "CronRepeat",
    "IntervalRepeat",
    "InvalidCron",
    "InvalidCursor",
    "InvalidInterval",
    "InvalidMetadata",
    "InvalidPayload",
    "InvalidRepeat",
    "InvalidRetry",
    "InvalidSetting",
    "InvalidTimerCommand",
    "InvalidTimezone",
    "InvalidTopic",
    "InvalidTransition",
    "JobMetadata",
    "JobNotFound",
    "JobPage",
    "JobStatus",
    "ListenerFailed",
    "ListenerRegistry",
    "NaiveDatetime",
    "NotReschedulable",
    "OneShotSpec",
    "QueueUnavailable",
    "ReconcileReport",
    "RepeatSpec",
    "RetryPolicy",
    "RunAtInPast",
    "ScheduleArrivedEvent",
    "ScheduleContainer",
    "ScheduleError",
    "ScheduleService",
    "ScheduleUnavailable",
    "ScheduleValidationError",
    "ScheduleWorker",
    "ScheduledJob",
    "Settings",
    "StoreUnavailable",
    "TransactionNotJoinable",
    "on_event",
    "schedule_arrived_event_name",
]
