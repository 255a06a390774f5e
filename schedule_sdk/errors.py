"""Every error this library raises: :class:`ScheduleError` and its subclasses, each with a stable
``code`` (see the error reference). Validation errors (:class:`ScheduleValidationError`) mean the
input was refused and nothing was written; :class:`ScheduleUnavailable` means a store, queue or
broker could not be reached, and the call may be retried.

::

    from schedule_sdk.errors import JobNotFound, ScheduleValidationError
"""

from __future__ import annotations

from schedule_sdk.domain.errors import (
    BrokerUnavailable,
    ClientRequestIdInUse,
    DuplicateDeclaration,
    InvalidCron,
    InvalidCursor,
    InvalidDatetime,
    InvalidDeclaration,
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
    JobOwnedByTimer,
    ListenerFailed,
    NaiveDatetime,
    NotRequeueable,
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
    UnheardFire,
)

__all__ = [
    "BrokerUnavailable",
    "ClientRequestIdInUse",
    "InvalidCron",
    "DuplicateDeclaration",
    "InvalidCursor",
    "InvalidDatetime",
    "InvalidDeclaration",
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
    "JobNotFound",
    "JobOwnedByTimer",
    "ListenerFailed",
    "NaiveDatetime",
    "NotRequeueable",
    "NotReschedulable",
    "NotTriggerable",
    "QueueUnavailable",
    "RunAtInPast",
    "ScheduleError",
    "ScheduleUnavailable",
    "ScheduleValidationError",
    "StoreLacksCapability",
    "StoreUnavailable",
    "TransactionNotJoinable",
    "UnheardFire",
]
