"""The timer's messages and entries: ``ScheduleTimer`` in, ``DueTimeReached`` out (in an envelope).

On the wire everything is JSON with camelCase names (docs/reference/timer-messages.md) and ISO
8601 UTC timestamps; inside, frozen dataclasses with aware UTC datetimes. Parsing raises
:class:`InvalidTimerCommand` (code ``TIMER_INVALID_COMMAND``) for anything malformed, so a bad
command never reaches the store. That includes what would only fail later, on one backend or
deep in a driver: a body too large or nested too deep to decode safely, a NUL or lone surrogate
in a text field, a due time that overflows when converted. One such command must never stall
the intake of the others, so every way a body can be wrong is refused here, with the one error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum, StrEnum
from typing import Any

from schedule_sdk.domain.errors import InvalidTimerCommand, ScheduleValidationError
from schedule_sdk.domain.ids import new_id
from schedule_sdk.domain.text import json_too_deep, plain_id, shown
from schedule_sdk.domain.timing import bounded_utc

#: The ``schedule_jobs`` topic of the one-shot job that fires a timer.
TIMER_TOPIC = "timer.due"
SCHEDULE_TIMER = "ScheduleTimer"
DUE_TIME_REACHED = "DueTimeReached"
#: Longest tenantId, serviceCallId and correlationId accepted (they are stored in job metadata too).
MAX_ID_LENGTH = 255
#: Largest command body accepted, in bytes (UTF-8): a command is a few hundred bytes; the rest is
#: room for an envelope's other fields. Larger bodies are refused before they are decoded.
MAX_COMMAND_BYTES = 64 * 1024
#: Deepest nesting of JSON arrays and objects accepted in a command body (a command needs 2: an
#: envelope around a payload). Checked before decoding: the decoder recurses once per level, so
#: a body nested thousands deep would exhaust the stack (``RecursionError``), not fail as JSON.
MAX_JSON_DEPTH = 32


class TimerState(StrEnum):
    SCHEDULED = "Scheduled"
    REACHED = "Reached"


class TimerOutcome(Enum):
    """What a ScheduleTimer command did."""

    CREATED = "created"  #: a new timer
    MOVED = "moved"  #: a Scheduled timer got the new due time
    UNCHANGED = "unchanged"  #: a Scheduled timer already had this due time
    IGNORED = "ignored"  #: the timer is Reached: no rescheduling after execution starts


def to_ms(instant: datetime, *, up: bool = False) -> datetime:
    """``instant`` in UTC at millisecond precision (the stored precision): floored, or rounded up."""
    instant = instant.astimezone(UTC)
    extra = instant.microsecond % 1000
    instant = instant - timedelta(microseconds=extra)
    return instant + timedelta(milliseconds=1) if up and extra else instant


def format_instant(instant: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.sssZ`` (UTC, milliseconds): the wire and storage format."""
    instant = instant.astimezone(UTC)
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


def parse_instant(value: object, name: str) -> datetime:
    """An aware UTC datetime from ISO 8601 text with an offset (``Z`` or ``±HH:MM``)."""
    if not isinstance(value, str) or not value:
        raise InvalidTimerCommand(f"{name} must be an ISO 8601 string, not {_describe(value)}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as error:
        raise InvalidTimerCommand(f"{name} is not an ISO 8601 timestamp: {shown(value)}") from error
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise InvalidTimerCommand(f"{name} has no UTC offset (naive timestamps are refused): {shown(value)}")
    return bounded_utc(parsed, name, InvalidTimerCommand)


def _describe(value: object) -> str:
    return "null" if value is None else f"{type(value).__name__} {shown(value)}"


def _check_id(value: object, name: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_LENGTH:
        raise InvalidTimerCommand(
            f"{name} must be a non-empty string of at most {MAX_ID_LENGTH} characters, not {_describe(value)}"
        )
    plain_id(value, name, InvalidTimerCommand)


def as_refusal(error: Exception, stage: str) -> ScheduleValidationError:
    """``error`` as the refusal of one command: itself if it is a validation error, else an
    :class:`InvalidTimerCommand` naming it (chained as ``__cause__``). An exception nobody
    foresaw while decoding or persisting one command is still that command's fault as far as
    the intake is concerned: it is refused alone, so that it cannot hold up the others."""
    if isinstance(error, ScheduleValidationError):
        return error
    refusal = InvalidTimerCommand(f"{stage} failed: {type(error).__name__}: {error}"[:500])
    refusal.__cause__ = error
    return refusal


def _check_nesting(raw: bytes) -> None:
    """Refuse ``raw`` if its arrays and objects nest deeper than :data:`MAX_JSON_DEPTH`."""
    if json_too_deep(raw, MAX_JSON_DEPTH):
        raise InvalidTimerCommand(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")


def _load_object(data: str | bytes | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(data, Mapping):
        return data
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > MAX_COMMAND_BYTES:
        raise InvalidTimerCommand(
            f"the command is {len(raw)} bytes; at most {MAX_COMMAND_BYTES} are accepted"
        )
    _check_nesting(raw)
    try:
        loaded = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidTimerCommand(f"not JSON: {error}") from error
    except RecursionError as error:  # not reached after _check_nesting; kept so it can never escape
        raise InvalidTimerCommand("JSON nested too deep to decode") from error
    if not isinstance(loaded, dict):
        raise InvalidTimerCommand(f"a ScheduleTimer command must be a JSON object, not {_describe(loaded)}")
    return loaded


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleTimer:
    """Schedule (or move) the timer of ``(tenant_id, service_call_id)`` to ``due_at``.

    ``due_at`` must be aware; it is kept in UTC, rounded up to the millisecond (never early).
    A due time in the past is accepted: the timer fires at once. In UTC it must lie from
    :data:`~schedule_sdk.domain.timing.MIN_INSTANT` to :data:`~schedule_sdk.domain.timing.MAX_INSTANT`.
    The ids hold no NUL and no lone surrogate (:mod:`schedule_sdk.domain.text`).
    """

    tenant_id: str
    service_call_id: str
    due_at: datetime
    correlation_id: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.tenant_id, "tenantId")
        _check_id(self.service_call_id, "serviceCallId")
        _check_id(self.correlation_id, "correlationId", optional=True)
        if not isinstance(self.due_at, datetime):
            raise InvalidTimerCommand(f"dueAt must be a datetime, not {_describe(self.due_at)}")
        if self.due_at.tzinfo is None or self.due_at.utcoffset() is None:
            raise InvalidTimerCommand("dueAt is naive: give it a timezone (naive datetimes are refused)")
        due_at = bounded_utc(self.due_at, "dueAt", InvalidTimerCommand)
        object.__setattr__(self, "due_at", to_ms(due_at, up=True))

    @classmethod
    def from_json(cls, data: str | bytes | Mapping[str, Any]) -> ScheduleTimer:
        """Parse a command: a bare ``{tenantId, serviceCallId, dueAt, correlationId?}`` object, or a
        message envelope of type ``ScheduleTimer`` carrying it as ``payload`` (the envelope's
        ``correlationId`` is used when the payload has none)."""
        body = _load_object(data)
        envelope_correlation = None
        if "payload" in body and body.get("type") == SCHEDULE_TIMER:
            envelope_correlation = body.get("correlationId")
            body = _load_object(body["payload"]) if isinstance(body["payload"], dict) else {}
        correlation = body.get("correlationId", envelope_correlation)
        return cls(
            tenant_id=body.get("tenantId"),  # type: ignore[arg-type]  # checked in __post_init__
            service_call_id=body.get("serviceCallId"),  # type: ignore[arg-type]
            due_at=parse_instant(body.get("dueAt"), "dueAt"),
            correlation_id=envelope_correlation if correlation is None else correlation,
        )

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "tenantId": self.tenant_id,
            "serviceCallId": self.service_call_id,
            "dueAt": format_instant(self.due_at),
        }
        if self.correlation_id is not None:
            body["correlationId"] = self.correlation_id
        return body

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()


@dataclass(frozen=True, kw_only=True, slots=True)
class DueTimeReached:
    """The event: the due time of ``(tenant_id, service_call_id)`` was reached at ``reached_at``."""

    tenant_id: str
    service_call_id: str
    reached_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenantId": self.tenant_id,
            "serviceCallId": self.service_call_id,
            "reachedAt": format_instant(self.reached_at),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Envelope:
    """Seed 001's message envelope around a :class:`DueTimeReached` (``type`` ``"DueTimeReached"``).

    ``id`` is a fresh UUIDv7 per publish (the JetStream ``Nats-Msg-Id``); ``causation_id`` is
    always None for timer events (time-triggered); ``aggregate_id`` is the serviceCallId.
    """

    id: str
    payload: DueTimeReached
    tenant_id: str
    timestamp_ms: int
    correlation_id: str | None
    causation_id: str | None = None
    aggregate_id: str | None = None
    type: str = DUE_TIME_REACHED

    @classmethod
    def due_time_reached(cls, entry: TimerEntry, reached_at: datetime) -> Envelope:
        event = DueTimeReached(
            tenant_id=entry.tenant_id, service_call_id=entry.service_call_id, reached_at=reached_at
        )
        return cls(
            id=new_id(),
            payload=event,
            tenant_id=entry.tenant_id,
            timestamp_ms=int(reached_at.timestamp() * 1000),
            correlation_id=entry.correlation_id,
            aggregate_id=entry.service_call_id,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "payload": self.payload.to_dict(),
            "tenantId": self.tenant_id,
            "timestampMs": self.timestamp_ms,
            "correlationId": self.correlation_id,
            "causationId": self.causation_id,
            "aggregateId": self.aggregate_id,
        }

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: str | bytes) -> Envelope:
        """Parse a DueTimeReached envelope (for consumers and tests)."""
        body = json.loads(data)
        payload = body["payload"]
        return cls(
            id=body["id"],
            type=body["type"],
            payload=DueTimeReached(
                tenant_id=payload["tenantId"],
                service_call_id=payload["serviceCallId"],
                reached_at=parse_instant(payload["reachedAt"], "reachedAt"),
            ),
            tenant_id=body["tenantId"],
            timestamp_ms=body["timestampMs"],
            correlation_id=body.get("correlationId"),
            causation_id=body.get("causationId"),
            aggregate_id=body.get("aggregateId"),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class TimerEntry:
    """One row of ``timer_schedules``: when the timer fires (``due_at``) and whether it did."""

    tenant_id: str
    service_call_id: str
    correlation_id: str
    due_at: datetime
    registered_at: datetime
    state: TimerState = TimerState.SCHEDULED
    reached_at: datetime | None = None

    @property
    def reached(self) -> bool:
        return self.state is TimerState.REACHED
