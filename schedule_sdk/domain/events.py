"""The event every fire emits, the events for occurrences that did not fire and for a job that
gave up, and their names."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from schedule_sdk.domain.jobs import JobMetadata, JsonObject, validate_topic

#: Emitted on every fire of every job.
SCHEDULE_ARRIVED_EVENT = "schedule.arrived"
#: Emitted when occurrences of a job do not fire (see :class:`ScheduleMissedEvent`).
SCHEDULE_MISSED_EVENT = "schedule.missed"
#: Emitted once a job gives up: a failed attempt that is not retried (see :class:`ScheduleFailedEvent`).
SCHEDULE_FAILED_EVENT = "schedule.failed"
#: Most characters of the last error's traceback a :class:`ScheduleFailedEvent` carries (its tail).
MAX_FAILED_TRACEBACK = 4000
#: Most missed due instants a :class:`ScheduleMissedEvent` names (``count`` has them all).
MAX_NAMED_MISSED = 100


#: Why occurrences did not fire: ``"misfire"`` (the job's misfire policy skipped or coalesced
#: them), ``"overlap"`` (they came due while the job's previous fire still ran and its overlap
#: policy did not fire them), ``"excluded"`` (the job's calendar excludes them).
MissedReason = Literal["misfire", "overlap", "excluded"]


def schedule_arrived_event_name(topic: str) -> str:
    """The per-topic alias, also emitted on every fire: ``schedule.<topic>.arrived``."""
    return f"schedule.{validate_topic(topic)}.arrived"


def schedule_missed_event_name(topic: str) -> str:
    """The per-topic alias of ``schedule.missed``: ``schedule.<topic>.missed``."""
    return f"schedule.{validate_topic(topic)}.missed"


def schedule_failed_event_name(topic: str) -> str:
    """The per-topic alias of ``schedule.failed``: ``schedule.<topic>.failed``."""
    return f"schedule.{validate_topic(topic)}.failed"


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleArrivedEvent:
    """A job's due time arrived. Delivered at least once: ``(scheduled_job_id, occurrence)`` is a
    stable de-duplication key (it stays the same across retries and crash replays)."""

    scheduled_job_id: str
    topic: str
    user_payload: JsonObject | None
    metadata: JobMetadata
    #: The job's IANA zone, verbatim: use it to display times to the user.
    timezone: str
    #: The due instant this fire is for (aware UTC); ``fired_at - scheduled_for`` is the lateness.
    scheduled_for: datetime
    #: When the fire started (aware UTC): an instant known to have passed on the store's clock
    #: when the listeners were called, never before ``scheduled_for`` or the actual due instant.
    fired_at: datetime
    #: 1-based attempt number within this occurrence.
    attempt: int
    #: 1-based occurrence number (always 1 for a one-shot job).
    occurrence: int

    @property
    def dedup_key(self) -> str:
        return f"{self.scheduled_job_id}:{self.occurrence}"

    @property
    def names(self) -> tuple[str, str]:
        """The two names it is emitted under."""
        return SCHEDULE_ARRIVED_EVENT, schedule_arrived_event_name(self.topic)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (times as ISO 8601 UTC)."""
        return {
            "scheduled_job_id": self.scheduled_job_id,
            "topic": self.topic,
            "user_payload": self.user_payload,
            "metadata": self.metadata.to_dict(),
            "timezone": self.timezone,
            "scheduled_for": self.scheduled_for.isoformat(),
            "fired_at": self.fired_at.isoformat(),
            "attempt": self.attempt,
            "occurrence": self.occurrence,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduleArrivedEvent:
        return cls(
            scheduled_job_id=data["scheduled_job_id"],
            topic=data["topic"],
            user_payload=data["user_payload"],
            metadata=JobMetadata.stored(**data["metadata"]),
            timezone=data["timezone"],
            scheduled_for=datetime.fromisoformat(data["scheduled_for"]),
            fired_at=datetime.fromisoformat(data["fired_at"]),
            attempt=data["attempt"],
            occurrence=data["occurrence"],
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleMissedEvent:
    """Occurrences of a job that did not fire: skipped, coalesced into another fire, or dropped
    from a catch-up backlog by the job's misfire policy, not fired by its overlap policy, or on
    a date its calendar excludes (``reason`` says which). Emitted (as ``schedule.missed`` and
    ``schedule.<topic>.missed``) by the worker that decided it, at most once per decision plus
    crash replays: ``dedup_key`` (the job id and the first missed instant) is stable."""

    scheduled_job_id: str
    topic: str
    user_payload: JsonObject | None
    metadata: JobMetadata
    timezone: str
    #: The job's misfire mode: ``fire_once``, ``skip`` or ``fire_all``.
    policy: str
    #: The missed due instants (aware UTC), earliest first; at most :data:`MAX_NAMED_MISSED`.
    missed: tuple[datetime, ...]
    #: How many occurrences were missed (``len(missed)`` or more; for cron schedules counted up
    #: to 10,000).
    count: int
    #: When the worker decided (aware UTC).
    detected_at: datetime
    #: Why they did not fire (:data:`MissedReason`); ``policy`` is the misfire mode whatever
    #: the reason. The missed instants are nominal occurrences (before any spread or jitter).
    reason: MissedReason = "misfire"

    @property
    def dedup_key(self) -> str:
        return f"{self.scheduled_job_id}:missed:{self.missed[0].isoformat()}"

    @property
    def names(self) -> tuple[str, str]:
        """The two names it is emitted under."""
        return SCHEDULE_MISSED_EVENT, schedule_missed_event_name(self.topic)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (times as ISO 8601 UTC)."""
        return {
            "scheduled_job_id": self.scheduled_job_id,
            "topic": self.topic,
            "user_payload": self.user_payload,
            "metadata": self.metadata.to_dict(),
            "timezone": self.timezone,
            "policy": self.policy,
            "missed": [m.isoformat() for m in self.missed],
            "count": self.count,
            "detected_at": self.detected_at.isoformat(),
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduleMissedEvent:
        return cls(
            scheduled_job_id=data["scheduled_job_id"],
            topic=data["topic"],
            user_payload=data["user_payload"],
            metadata=JobMetadata.stored(**data["metadata"]),
            timezone=data["timezone"],
            policy=data["policy"],
            missed=tuple(datetime.fromisoformat(m) for m in data["missed"]),
            count=data["count"],
            detected_at=datetime.fromisoformat(data["detected_at"]),
            reason=data.get("reason", "misfire"),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleFailedEvent:
    """A job gave up: an attempt failed and is not retried (its attempts are spent, or its
    retry policy does not retry that error). The fields of the :class:`ScheduleArrivedEvent` of
    that last attempt, plus its error. Emitted as ``schedule.failed`` and
    ``schedule.<topic>.failed``, at least once: the give-up inserts a notice row in the same
    transaction that records it, and the notice is fired (and retried) like any job, so a crash
    between the give-up and the event delays the event, never loses it. ``dedup_key`` is stable.

    A repeating job that gives up on an occurrence still moves on to its next one."""

    scheduled_job_id: str
    topic: str
    user_payload: JsonObject | None
    metadata: JobMetadata
    timezone: str
    scheduled_for: datetime
    #: When the last attempt started (aware UTC).
    fired_at: datetime
    #: The number of the last attempt (how many ran for this occurrence).
    attempt: int
    occurrence: int
    #: The qualified name of the last error's type (each listener's, comma-separated, when
    #: several listeners raised), e.g. ``builtins.ConnectionError``.
    error_type: str
    #: ``Type: message`` of the last error (each listener's, ``; ``-separated).
    error_message: str
    #: The tail of the last error's traceback (at most :data:`MAX_FAILED_TRACEBACK` characters);
    #: None when it had none (e.g. an unheard fire made a failure by ``unheard_fails``).
    traceback: str | None
    #: When the worker gave up (aware UTC).
    failed_at: datetime

    @property
    def dedup_key(self) -> str:
        return f"{self.scheduled_job_id}:{self.occurrence}:failed"

    @property
    def names(self) -> tuple[str, str]:
        """The two names it is emitted under."""
        return SCHEDULE_FAILED_EVENT, schedule_failed_event_name(self.topic)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (times as ISO 8601 UTC)."""
        return {
            "scheduled_job_id": self.scheduled_job_id,
            "topic": self.topic,
            "user_payload": self.user_payload,
            "metadata": self.metadata.to_dict(),
            "timezone": self.timezone,
            "scheduled_for": self.scheduled_for.isoformat(),
            "fired_at": self.fired_at.isoformat(),
            "attempt": self.attempt,
            "occurrence": self.occurrence,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "traceback": self.traceback,
            "failed_at": self.failed_at.isoformat(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduleFailedEvent:
        return cls(
            scheduled_job_id=data["scheduled_job_id"],
            topic=data["topic"],
            user_payload=data["user_payload"],
            metadata=JobMetadata.stored(**data["metadata"]),
            timezone=data["timezone"],
            scheduled_for=datetime.fromisoformat(data["scheduled_for"]),
            fired_at=datetime.fromisoformat(data["fired_at"]),
            attempt=data["attempt"],
            occurrence=data["occurrence"],
            error_type=data["error_type"],
            error_message=data["error_message"],
            traceback=data["traceback"],
            failed_at=datetime.fromisoformat(data["failed_at"]),
        )


#: Any event the SDK emits to listeners.
ScheduleEvent = ScheduleArrivedEvent | ScheduleMissedEvent | ScheduleFailedEvent
