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
    InvalidMisfire,
    InvalidPayload,
    InvalidRepeat,
    InvalidRetry,
    InvalidSetting,
    InvalidStatus,
    InvalidTimerCommand,
    InvalidTimezone,
    InvalidTopic,
    InvalidTransition,
    JobFinished,
    JobNotFound,
    ListenerFailed,
    NaiveDatetime,
    NotReschedulable,
    NotTriggerable,
    QueueUnavailable,
    RunAtInPast,
    ScheduleError,
    ScheduleUnavailable,
    ScheduleValidationError,
    StoreUnavailable,
    TransactionNotJoinable,
)
from .domain.events import (
    SCHEDULE_ARRIVED_EVENT,
    SCHEDULE_MISSED_EVENT,
    ScheduleArrivedEvent,
    ScheduleMissedEvent,
    schedule_arrived_event_name,
    schedule_missed_event_name,
)
from .domain.history import FireOutcome, FireRecord
from .domain.jobs import (
    Backoff,
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
from .domain.status import JobStatus
from .domain.timing import FireTime
from .listeners import ListenerRegistry, on_event
from .reconciler import ReconcileReport
from .runtimes.worker import ScheduleWorker
from .service import ScheduleService
from .settings import Settings

__all__ = [
    "SCHEDULE_ARRIVED_EVENT",
    "SCHEDULE_MISSED_EVENT",
    "AsyncScheduleService",
    "Backoff",
    "BrokerUnavailable",
    "ClientRequestIdInUse",
    "CronRepeat",
    "FireOutcome",
    "FireRecord",
    "FireTime",
    "IntervalRepeat",
    "InvalidCron",
    "InvalidCursor",
    "InvalidInterval",
    "InvalidMetadata",
    "InvalidMisfire",
    "InvalidPayload",
    "InvalidRepeat",
    "InvalidRetry",
    "InvalidSetting",
    "InvalidStatus",
    "InvalidTimerCommand",
    "InvalidTimezone",
    "InvalidTopic",
    "InvalidTransition",
    "JobFinished",
    "JobMetadata",
    "JobNotFound",
    "JobPage",
    "JobStatus",
    "ListenerFailed",
    "ListenerRegistry",
    "MisfirePolicy",
    "NaiveDatetime",
    "NotReschedulable",
    "NotTriggerable",
    "OneShotSpec",
    "QueueUnavailable",
    "ReconcileReport",
    "RepeatSpec",
    "RetryPolicy",
    "RunAtInPast",
    "ScheduleArrivedEvent",
    "ScheduleContainer",
    "ScheduleError",
    "ScheduleMissedEvent",
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
    "schedule_missed_event_name",
]
