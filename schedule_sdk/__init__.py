"""schedule_sdk: durable scheduled jobs and multi-tenant timers.

Inject :class:`ScheduleService` (from :class:`ScheduleContainer`), schedule jobs with
``schedule_at`` / ``schedule_repeat``, and receive ``schedule.arrived`` events in ``@on_event``
listeners — at least once, across crashes and restarts.
"""

from __future__ import annotations

from schedule_sdk.aio.service import AsyncScheduleService
from schedule_sdk.bootstrap.container import ScheduleContainer
from schedule_sdk.bootstrap.settings import Settings
from schedule_sdk.core.listeners import ListenerRegistry, on_event
from schedule_sdk.core.reconciler import ReconcileReport
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.core.worker import ScheduleWorker
from schedule_sdk.domain.errors import (
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
    StoreLacksCapability,
    StoreUnavailable,
    TransactionNotJoinable,
)
from schedule_sdk.domain.events import (
    SCHEDULE_ARRIVED_EVENT,
    SCHEDULE_MISSED_EVENT,
    ScheduleArrivedEvent,
    ScheduleMissedEvent,
    schedule_arrived_event_name,
    schedule_missed_event_name,
)
from schedule_sdk.domain.history import FireOutcome, FireRecord
from schedule_sdk.domain.jobs import (
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
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.timing import FireTime

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
    "StoreLacksCapability",
    "StoreUnavailable",
    "TransactionNotJoinable",
    "on_event",
    "schedule_arrived_event_name",
    "schedule_missed_event_name",
]
