"""The event every fire emits, and its names."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .jobs import JobMetadata, JsonObject, validate_topic

#: Emitted on every fire of every job.
SCHEDULE_ARRIVED_EVENT = "schedule.arrived"


def schedule_arrived_event_name(topic: str) -> str:
    """The per-topic alias, also emitted on every fire: ``schedule.<topic>.arrived``."""
    return f"schedule.{validate_topic(topic)}.arrived"


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
    #: When the fire started (aware UTC).
    fired_at: datetime
    #: 1-based attempt number within this occurrence.
    attempt: int
    #: 1-based occurrence number (always 1 for a one-shot job).
    occurrence: int

    @property
    def dedup_key(self) -> str:
        return f"{self.scheduled_job_id}:{self.occurrence}"

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
            metadata=JobMetadata(**data["metadata"]),
            timezone=data["timezone"],
            scheduled_for=datetime.fromisoformat(data["scheduled_for"]),
            fired_at=datetime.fromisoformat(data["fired_at"]),
            attempt=data["attempt"],
            occurrence=data["occurrence"],
        )
