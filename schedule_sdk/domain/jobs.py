"""What to schedule (specs, validated on construction) and what is stored (``ScheduledJob``).

Specs are frozen and keyword-only; an invalid one cannot be built, so a refused call never
reaches the store. Checks that need "now" or the service's settings (``run_at`` in the past,
the payload size limit) are made by :class:`~schedule_sdk.core.service.ScheduleService`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import operator
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Self

from schedule_sdk.domain import timing
from schedule_sdk.domain.calendars import SEARCH_YEARS, Calendar
from schedule_sdk.domain.errors import (
    InvalidCalendar,
    InvalidConcurrency,
    InvalidMetadata,
    InvalidMisfire,
    InvalidOverlap,
    InvalidPayload,
    InvalidRepeat,
    InvalidRetry,
    InvalidSpread,
    InvalidTimezone,
    RunAtInPast,
)
from schedule_sdk.domain.history import FireOutcome
from schedule_sdk.domain.metadata import MAX_METADATA_LENGTH as MAX_METADATA_LENGTH
from schedule_sdk.domain.metadata import JobMetadata as JobMetadata
from schedule_sdk.domain.metadata import check_metadata_text as check_metadata_text
from schedule_sdk.domain.retry import MAX_ATTEMPTS as MAX_ATTEMPTS
from schedule_sdk.domain.retry import NO_RETRY as NO_RETRY
from schedule_sdk.domain.retry import Backoff as Backoff
from schedule_sdk.domain.retry import RetryPolicy as RetryPolicy
from schedule_sdk.domain.status import FINISHED_STATUSES, JobStatus, check_transition
from schedule_sdk.domain.text import (
    json_holds_nul,
    json_too_deep,
    plain_id,
    shown,
    unstorable_character,
)
from schedule_sdk.domain.time_limits import check_time_limit
from schedule_sdk.domain.topics import MAX_TOPIC_LENGTH as MAX_TOPIC_LENGTH
from schedule_sdk.domain.topics import validate_topic as validate_topic

JsonObject = Mapping[str, Any]

#: Deepest nesting of arrays and objects in a payload (the payload object itself is level 1).
#: The payload's size in bytes is bounded by the ``max_payload_bytes`` setting.
MAX_PAYLOAD_DEPTH = 32


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: Built once: ``json.dumps`` with options builds a new encoder on every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode_json(value: object, what: str = "payload") -> str:
    """Compact JSON text for ``value``; :class:`InvalidPayload` if it is not plain JSON (nested
    too deep to encode included)."""
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"{what} is not JSON-serializable: {exc}"[:300]) from exc
    except RecursionError as exc:
        raise InvalidPayload(f"{what} is nested too deep to encode") from exc


def check_payload(payload: object) -> str | None:
    """The JSON text of a payload, or None for none; :class:`InvalidPayload` unless it is a
    mapping of plain JSON, nested at most :data:`MAX_PAYLOAD_DEPTH` deep, whose strings and keys
    hold no NUL and no lone surrogate (:mod:`schedule_sdk.domain.text`)."""
    if payload is None:
        return None
    if not isinstance(payload, Mapping):
        raise InvalidPayload(f"payload must be a JSON object (a mapping), not {type(payload).__name__}")
    text = encode_json(payload)
    problem = unstorable_character(text) or ("a NUL character" if json_holds_nul(text) else None)
    if problem is not None:
        raise InvalidPayload(f"payload contains {problem.split(' at ')[0]}, which no store can hold")
    if json_too_deep(text, MAX_PAYLOAD_DEPTH):
        raise InvalidPayload(f"payload is nested deeper than {MAX_PAYLOAD_DEPTH} levels")
    return text


MisfireMode = Literal["fire_once", "skip", "fire_all"]
MAX_CATCH_UP = 10_000
#: ``grace_ms`` when none is given: 0 for ``fire_once`` and ``fire_all``, one minute for ``skip``.
DEFAULT_GRACE_MS: dict[str, int] = {"fire_once": 0, "skip": 60_000, "fire_all": 0}


@dataclass(frozen=True, kw_only=True, slots=True)
class MisfirePolicy:
    """What happens to occurrences a worker reaches late (after downtime, a pause, a backlog).

    An occurrence more than ``grace_ms`` past its due instant when it is claimed (or, for the
    occurrences after a fire, when the fire is recorded) is *missed*:

    - ``fire_once`` (the default): the job's current occurrence fires however late (one catch-up
      fire) and every later occurrence missed meanwhile is coalesced into it;
    - ``skip``: a missed occurrence does not fire; the job moves to its first occurrence that is
      not missed;
    - ``fire_all``: every occurrence fires, one after another; when more than ``max_catch_up``
      are overdue at once, the oldest beyond that many are dropped (``grace_ms`` is not used).

    Every occurrence that does not fire is named in a ``schedule.missed`` event. A one-shot job
    has one occurrence: ``skip`` completes it without firing when it is missed.
    """

    mode: MisfireMode = "fire_once"
    #: Milliseconds an occurrence may be late and still count as on time (None: the mode's
    #: default, :data:`DEFAULT_GRACE_MS`).
    grace_ms: int | None = None
    #: ``fire_all`` only: the most overdue occurrences fired in a row.
    max_catch_up: int = 100

    def __post_init__(self) -> None:
        if self.mode not in DEFAULT_GRACE_MS:
            raise InvalidMisfire(
                f"misfire mode must be 'fire_once', 'skip' or 'fire_all', not {shown(self.mode)}"
            )
        if self.grace_ms is None:
            object.__setattr__(self, "grace_ms", DEFAULT_GRACE_MS[self.mode])
        elif not _is_int(self.grace_ms) or not 0 <= self.grace_ms <= 366 * 86_400_000:
            raise InvalidMisfire(f"grace_ms must be an int from 0 to 366 days, not {shown(self.grace_ms)}")
        if not _is_int(self.max_catch_up) or not 1 <= self.max_catch_up <= MAX_CATCH_UP:
            raise InvalidMisfire(
                f"max_catch_up must be an int from 1 to {MAX_CATCH_UP}, not {shown(self.max_catch_up)}"
            )

    @property
    def grace(self) -> timedelta:
        return timedelta(milliseconds=self.grace_ms or 0)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "grace_ms": self.grace_ms, "max_catch_up": self.max_catch_up}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(mode=data["mode"], grace_ms=data["grace_ms"], max_catch_up=data["max_catch_up"])


FIRE_ONCE = MisfirePolicy()

#: What a repeating job does with an occurrence that comes due while its previous fire is still
#: running: ``"skip"`` (it does not fire; it is reported missed with the reason ``overlap``),
#: ``"buffer_one"`` (the latest such occurrence waits and fires as soon as the running fire
#: ends; any earlier ones are reported missed) or ``"allow"`` (it fires at its due time, running
#: alongside the earlier ones: each occurrence is handed to a *run*, a one-shot row of its own,
#: :attr:`ScheduledJob.run_of`). None (the default): the misfire policy decides, as for any
#: occurrence found late when a fire is recorded.
OverlapPolicy = Literal["skip", "buffer_one", "allow"]
OVERLAP_POLICIES: tuple[OverlapPolicy, ...] = ("skip", "buffer_one", "allow")


def check_overlap(overlap: object, *, repeating: bool = True) -> OverlapPolicy | None:
    """``overlap`` if it is an overlap policy a job may have; else :class:`InvalidOverlap` (a
    one-shot job, ``repeating`` False, may only have None: it has no second occurrence)."""
    if overlap is None:
        return None
    if not isinstance(overlap, str) or overlap not in OVERLAP_POLICIES:
        raise InvalidOverlap(f"overlap must be None, 'skip', 'buffer_one' or 'allow', not {shown(overlap)}")
    if not repeating:
        raise InvalidOverlap(
            "a one-shot job has a single occurrence and nothing can overlap it: "
            "overlap= is for repeating jobs"
        )
    return overlap


#: The widest ``spread`` or ``jitter``: seven days.
MAX_SPREAD = timedelta(days=7)
_MS = timedelta(milliseconds=1)
_TICK = timedelta(microseconds=1)


def spread_ms(value: object, name: str = "spread") -> int | None:
    """``value`` (a timedelta, or None for none) in whole milliseconds, rounded down;
    :class:`InvalidSpread` unless it is from 1 ms to :data:`MAX_SPREAD`."""
    if value is None:
        return None
    if not isinstance(value, timedelta) or not _MS <= value <= MAX_SPREAD:
        raise InvalidSpread(f"{name} must be a timedelta from 1 millisecond to 7 days, not {shown(value)}")
    return value // _MS


def spread_offset_ms(key: str, window_ms: int) -> int:
    """The deterministic offset in ``[0, window_ms)`` milliseconds of the jobs spread by ``key``
    (the job's ``spread_key``, else its id; a declared schedule's name): the first eight bytes
    of the key's SHA-256, modulo the window. The same key gives the same offset in every process
    and release, and many keys spread evenly over the window."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % window_ms


def _check_spread(spec: OneShotSpec | RepeatSpec) -> None:
    spread_ms(spec.spread, "spread")
    spread_ms(spec.jitter, "jitter")
    key = spec.spread_key
    if key is not None:
        if not isinstance(key, str) or not key or len(key) > MAX_METADATA_LENGTH:
            raise InvalidSpread("spread_key must be a non-empty string of at most 255 characters")
        plain_id(key, "spread_key", InvalidSpread)
        if spec.spread is None:
            raise InvalidSpread("spread_key is given without a spread")


_CONCURRENCY_KEY = re.compile(r"[A-Za-z0-9]+(?:[._:-][A-Za-z0-9]+)*")
MAX_CONCURRENCY_KEY_LENGTH = 200
MAX_CONCURRENCY_LIMIT = 10_000


@dataclass(frozen=True, kw_only=True, slots=True)
class ConcurrencyLimit:
    """At most ``limit`` fires of jobs naming ``key`` run at once, across every worker and process.

    A fire of this job starts only while fewer than this job's own ``limit`` fires with ``key`` are
    running (claimed and not yet recorded); the others wait, in due order, and start as soon as a
    slot frees. Jobs that name one key with different limits each apply their own: a job with a
    lower limit is the stricter one, and at most the highest limit among them run at once. Give
    every job of a key the same limit (``reschedule`` changes it) to have one number.
    """

    #: A name of letters and digits with single ``.``, ``_``, ``-`` or ``:`` between them.
    key: str
    #: 1 to :data:`MAX_CONCURRENCY_LIMIT`.
    limit: int = 1

    def __post_init__(self) -> None:
        key = self.key
        if (
            not isinstance(key, str)
            or len(key) > MAX_CONCURRENCY_KEY_LENGTH
            or not _CONCURRENCY_KEY.fullmatch(key)
        ):
            raise InvalidConcurrency(f"invalid concurrency key {shown(key)}: {InvalidConcurrency.__doc__}")
        if not _is_int(self.limit) or not 1 <= self.limit <= MAX_CONCURRENCY_LIMIT:
            raise InvalidConcurrency(
                f"concurrency limit must be an int from 1 to {MAX_CONCURRENCY_LIMIT}, not {shown(self.limit)}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "limit": self.limit}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(key=data["key"], limit=data["limit"])


@dataclass(frozen=True, kw_only=True, slots=True)
class CronRepeat:
    """A 5-field cron expression, evaluated in ``timezone`` (else the spec's) with Debian-cron DST rules."""

    expression: str
    timezone: str | None = None
    type: Literal["cron"] = field(default="cron", init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str):
            raise InvalidRepeat("cron expression must be a string")
        timing.validate_cron(self.expression)
        if self.timezone is not None:
            timing.zone(self.timezone)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "cron", "expression": self.expression, "timezone": self.timezone}

    def next_fire_times(
        self, after: datetime, n: int = 5, *, timezone: str | None = None
    ) -> list[timing.FireTime]:
        """The next ``n`` (1 to 1000) fires strictly after ``after`` (aware), in order, in this
        repeat's zone, else ``timezone`` (the spec's); :class:`InvalidTimezone` if neither is set."""
        if self.timezone is None and timezone is None:
            raise InvalidTimezone("this CronRepeat has no timezone: pass timezone=")
        return timing.cron_fire_times(self.expression, repeat_zone(self, timezone or "UTC"), after, n)


@dataclass(frozen=True, kw_only=True, slots=True)
class IntervalRepeat:
    """Fixed-rate repetition every ``every_ms`` milliseconds, counted from the first due time."""

    every_ms: int
    type: Literal["interval"] = field(default="interval", init=False)

    def __post_init__(self) -> None:
        timing.validate_interval(self.every_ms)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "interval", "every_ms": self.every_ms}

    def next_fire_times(
        self, after: datetime, n: int = 5, *, timezone: str = "UTC", anchor: datetime | None = None
    ) -> list[timing.FireTime]:
        """The next ``n`` (1 to 1000) fixed-rate fires strictly after ``after``, counted from
        ``anchor`` (default ``after``: the first is ``after + every_ms``), shown in ``timezone``."""
        return timing.interval_fire_times(anchor or after, self.every_ms, after, n, timezone)


Repeat = CronRepeat | IntervalRepeat


# -- occurrence arithmetic: the one home of "which zone a cron uses" and "when is the next one" --


def repeat_zone(repeat: Repeat | None, timezone: str) -> str:
    """The zone a repeat is evaluated (and a fire is shown) in: a cron's own ``timezone`` when it
    has one, else ``timezone`` (the spec's, or the stored job's)."""
    if isinstance(repeat, CronRepeat) and repeat.timezone:
        return repeat.timezone
    return timezone


def next_occurrence(repeat: Repeat, timezone: str, anchor: datetime, after: datetime) -> datetime:
    """The first occurrence of ``repeat`` strictly after ``after``: a cron in
    :func:`repeat_zone`, an interval on the fixed-rate grid through ``anchor``."""
    if isinstance(repeat, CronRepeat):
        return timing.next_cron_time(repeat.expression, repeat_zone(repeat, timezone), after)
    return timing.next_interval_time(anchor, repeat.every_ms, after)


def check_calendar(
    repeat: Repeat, timezone: str, calendar: Calendar, first: datetime, ends_at: datetime | None
) -> None:
    """:class:`InvalidCalendar` unless an occurrence of ``repeat`` from ``first`` (one of its
    occurrences) on, within :data:`~schedule_sdk.domain.calendars.SEARCH_YEARS` years and not
    after ``ends_at``, falls on a date ``calendar`` does not exclude. The search moves a day at a
    time past excluded dates, so it is bounded by the number of days, not of occurrences."""
    zone = timing.zone(repeat_zone(repeat, timezone))
    horizon = first + timedelta(days=366 * SEARCH_YEARS)
    if ends_at is not None:
        horizon = min(horizon, ends_at)
    current = first
    while current <= horizon:
        local = timing.local_time(current, zone)
        if not calendar.excludes(local.date()):
            return
        # the first occurrence from the start of the next local day
        midnight = datetime.combine(local.date() + timedelta(days=1), datetime.min.time())
        current = next_occurrence(repeat, timezone, first, timing.wall_instant(midnight, zone) - _TICK)
    bounded = " (before its ends_at)" if ends_at is not None and ends_at == horizon else ""
    raise InvalidCalendar(
        f"the calendar excludes every occurrence of this schedule for {SEARCH_YEARS} years{bounded}"
    )


def repeat_from_dict(data: Mapping[str, Any]) -> Repeat:
    if data["type"] == "cron":
        return CronRepeat(expression=data["expression"], timezone=data.get("timezone"))
    return IntervalRepeat(every_ms=data["every_ms"])


#: ``timezone`` left out of a spec (the dataclass default): refused with a clear InvalidTimezone.
_NO_ZONE: Any = None


def _common_checks(spec: OneShotSpec | RepeatSpec) -> None:
    validate_topic(spec.topic)
    if spec.timezone is _NO_ZONE:
        raise InvalidTimezone(
            f"{type(spec).__name__} needs timezone=, the IANA zone its times are shown (and a cron "
            "is evaluated) in, e.g. timezone='UTC' or timezone='Europe/Berlin'"
        )
    timing.zone(spec.timezone)
    check_payload(spec.payload)
    if not isinstance(spec.metadata, JobMetadata):
        raise InvalidMetadata("metadata must be a JobMetadata")
    if not isinstance(spec.retry, RetryPolicy):
        raise InvalidRetry("retry must be a RetryPolicy")
    if not isinstance(spec.misfire, MisfirePolicy):
        raise InvalidMisfire("misfire must be a MisfirePolicy")
    _check_spread(spec)
    if spec.concurrency is not None and not isinstance(spec.concurrency, ConcurrencyLimit):
        raise InvalidConcurrency("concurrency must be a ConcurrencyLimit or None")


@dataclass(frozen=True, kw_only=True, slots=True)
class OneShotSpec:
    """A job that fires once, at ``run_at`` (an aware datetime, stored as UTC)."""

    topic: str
    run_at: datetime
    #: IANA zone name, stored verbatim and echoed in every event (required).
    timezone: str = _NO_ZONE
    payload: JsonObject | None = None
    metadata: JobMetadata = field(default_factory=JobMetadata)
    retry: RetryPolicy = NO_RETRY
    #: What happens when the job is reached more than a grace period late.
    misfire: MisfirePolicy = FIRE_ONCE
    #: A key shared with other jobs and the most fires of it that run at once (None: no limit).
    concurrency: ConcurrencyLimit | None = None
    #: Only None: a one-shot has nothing to overlap (any policy raises :class:`InvalidOverlap`).
    overlap: OverlapPolicy | None = None
    #: How long the listeners of one fire may run (1 ms to 7 days, kept in whole milliseconds);
    #: None: the worker's default for the topic, if any (see :mod:`~schedule_sdk.domain.time_limits`).
    time_limit: timedelta | None = None
    #: Delay the fire by a deterministic amount in ``[0, spread)`` derived from ``spread_key``
    #: (else the job's id); ``run_at`` stays the nominal instant the events report.
    spread: timedelta | None = None
    #: What the spread offset is derived from (None: the job's id).
    spread_key: str | None = None
    #: Delay the fire by a random amount in ``[0, jitter)``, drawn when the job is scheduled (not
    #: previewable).
    jitter: timedelta | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", self.metadata if self.metadata is not None else JobMetadata())
        object.__setattr__(self, "retry", self.retry if self.retry is not None else NO_RETRY)
        object.__setattr__(self, "misfire", self.misfire if self.misfire is not None else FIRE_ONCE)
        object.__setattr__(self, "run_at", timing.stored_instant(self.run_at, "run_at"))
        object.__setattr__(self, "time_limit", check_time_limit(self.time_limit))
        _common_checks(self)
        check_overlap(self.overlap, repeating=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class RepeatSpec:
    """A repeating job (cron or fixed interval), optionally ending after ``limit`` occurrences
    or at ``ends_at``."""

    topic: str
    #: IANA zone name (required): crons are evaluated in it unless they name their own.
    timezone: str = _NO_ZONE
    repeat: Repeat
    payload: JsonObject | None = None
    metadata: JobMetadata = field(default_factory=JobMetadata)
    retry: RetryPolicy = NO_RETRY
    #: Stop (status ``completed``) after this many occurrences.
    limit: int | None = None
    #: Stop (status ``completed``) when the next occurrence would be after this instant.
    ends_at: datetime | None = None
    #: What happens to occurrences reached more than a grace period late.
    misfire: MisfirePolicy = FIRE_ONCE
    #: A key shared with other jobs and the most fires of it that run at once (None: no limit).
    concurrency: ConcurrencyLimit | None = None
    #: What happens to an occurrence that comes due while the previous fire still runs
    #: (:data:`OverlapPolicy`; None: the misfire policy decides).
    overlap: OverlapPolicy | None = None
    #: How long the listeners of one fire may run (as in :class:`OneShotSpec`).
    time_limit: timedelta | None = None
    #: Delay every occurrence by the same deterministic amount in ``[0, spread)``, derived from
    #: ``spread_key`` (else the job's id): many jobs of one schedule are spread over the window.
    #: Only delays; the events' ``scheduled_for`` stays the nominal occurrence.
    spread: timedelta | None = None
    #: What the spread offset is derived from (None: the job's id; a declared schedule: its name).
    spread_key: str | None = None
    #: Delay each occurrence by a random amount in ``[0, jitter)``, drawn when the occurrence is
    #: computed (when the previous one is recorded): not previewable.
    jitter: timedelta | None = None
    #: Dates on which no occurrence fires (judged in the cron's zone, else ``timezone``): an
    #: excluded occurrence is skipped and reported in a ``schedule.missed`` event (reason
    #: ``excluded``).
    calendar: Calendar | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", self.metadata if self.metadata is not None else JobMetadata())
        object.__setattr__(self, "retry", self.retry if self.retry is not None else NO_RETRY)
        object.__setattr__(self, "misfire", self.misfire if self.misfire is not None else FIRE_ONCE)
        check_overlap(self.overlap)
        object.__setattr__(self, "time_limit", check_time_limit(self.time_limit))
        if not isinstance(self.repeat, CronRepeat | IntervalRepeat):
            raise InvalidRepeat("repeat must be a CronRepeat or an IntervalRepeat")
        if self.limit is not None and (not _is_int(self.limit) or self.limit < 1):
            raise InvalidRepeat(f"limit must be a positive int, not {shown(self.limit)}")
        if self.ends_at is not None:
            object.__setattr__(self, "ends_at", timing.stored_instant(self.ends_at, "ends_at"))
        _common_checks(self)
        if self.calendar is not None:
            if not isinstance(self.calendar, Calendar):
                raise InvalidCalendar("calendar must be a Calendar")
            self.calendar.check()

    def first_occurrence(self, now: datetime) -> datetime:
        """The first due instant of this repeat if scheduled at ``now`` (strictly after ``now``;
        an interval's grid starts at ``now``)."""
        return next_occurrence(self.repeat, self.timezone, now, now)

    def next_fire_times(self, after: datetime, n: int = 5) -> list[timing.FireTime]:
        """The next ``n`` (1 to 1000) fires of this spec if it were scheduled at ``after``, up to
        its ``limit`` and ``ends_at``: each delayed by the spread of its ``spread_key`` (none is
        known without one: the offset then comes from the job's id) and marked ``excluded`` on a
        date its calendar excludes. Jitter is not previewable."""
        fires = self.repeat.next_fire_times(after, n, timezone=self.timezone)
        if self.calendar is not None and fires:  # refused here as schedule_repeat would refuse it
            check_calendar(self.repeat, self.timezone, self.calendar, fires[0].at, self.ends_at)
        return [spec_fire(fire, self) for fire in bounded_fires(fires, self.limit, self.ends_at)]


JobSpec = OneShotSpec | RepeatSpec


def spec_fire(fire: timing.FireTime, spec: JobSpec) -> timing.FireTime:
    """A nominal fire of ``spec`` as it would fire: delayed by the spread of its ``spread_key``
    (unknown without one), marked ``excluded`` on a date its calendar excludes."""
    window = spread_ms(spec.spread)
    offset = 0 if window is None or spec.spread_key is None else spread_offset_ms(spec.spread_key, window)
    calendar = spec.calendar if isinstance(spec, RepeatSpec) else None
    excluded = calendar is not None and calendar.excludes(fire.local.date())
    return fire.delayed(fire.at + timedelta(milliseconds=offset), excluded=excluded)


def bounded_fires(
    fires: list[timing.FireTime], limit: int | None, ends_at: datetime | None
) -> list[timing.FireTime]:
    """``fires`` up to ``ends_at`` (judged at their nominal instants) and at most ``limit``."""
    kept = [f for f in fires if ends_at is None or (f.nominal or f.at) <= ends_at]
    return kept if limit is None else kept[:limit]


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduledJob:
    """A job as stored: the source of truth for its state. Times are aware UTC."""

    id: str
    topic: str
    status: JobStatus
    #: When the job is next due to fire (for a retry, when the retry is due).
    run_at: datetime
    timezone: str
    payload: JsonObject | None
    metadata: JobMetadata
    repeat: Repeat | None
    retry: RetryPolicy
    #: The due instant of the current occurrence (what ``ScheduleArrivedEvent.scheduled_for`` reports).
    scheduled_for: datetime
    #: 1-based number of the current occurrence; ``(id, occurrence)`` identifies one fire.
    occurrence: int = 1
    #: 1-based attempt number within the current occurrence.
    attempt: int = 1
    #: How many scheduled occurrences have finished (fired successfully or exhausted their
    #: retries); what ``limit`` counts. Extra fires from ``trigger`` and skipped occurrences are
    #: not counted.
    occurrence_count: int = 0
    limit: int | None = None
    ends_at: datetime | None = None
    last_fired_at: datetime | None = None
    last_error: str | None = None
    #: The worker holding the current fire, and until when its claim (lease) is valid.
    claimed_by: str | None = None
    claimed_until: datetime | None = None
    created_at: datetime
    updated_at: datetime
    rescheduled_from: str | None = None
    rescheduled_to: str | None = None
    misfire: MisfirePolicy = FIRE_ONCE
    #: Set while the current occurrence is an extra fire asked for by ``ScheduleService.trigger``
    #: on a repeating job: the due instant of the regular occurrence it was put before. Once the
    #: extra fire has finished, the schedule continues there (as the next occurrence number).
    regular_due: datetime | None = None
    #: The trace context of the call that scheduled the job (what the ``Tracing`` port
    #: captured, e.g. W3C ``traceparent`` as JSON), restored around each fire; None: none.
    trace_context: str | None = None
    #: The concurrency key and limit of this job's fires (None: no limit).
    concurrency: ConcurrencyLimit | None = None
    #: The repeating job's overlap policy (:data:`OverlapPolicy`; None: the misfire policy decides).
    overlap: OverlapPolicy | None = None
    #: How long the listeners of one fire may run; None: the worker's default for the topic.
    time_limit: timedelta | None = None
    #: The spread window in milliseconds (None: no spread).
    spread_ms: int | None = None
    #: This job's deterministic delay, in ``[0, spread_ms)``: every occurrence is due this long
    #: after its nominal instant (``scheduled_for``).
    spread_offset_ms: int = 0
    #: The random delay window in milliseconds (None: no jitter), drawn per occurrence.
    jitter_ms: int | None = None
    #: Dates on which no occurrence fires (None: none).
    calendar: Calendar | None = None
    #: Set on a *run*: the one-shot row that fires one occurrence of a repeating job with the
    #: overlap policy ``"allow"`` (:meth:`run_for`); the id of that job (None: not a run). Its
    #: events and fire history name that job and its occurrence number.
    run_of: str | None = None
    #: How the last attempt that ran ended (its fire history entry's outcome: ``succeeded``,
    #: ``failed``, ``skipped``, ``unheard``, ``timeout``); None: no attempt ran yet. Written
    #: with the outcome of each fire, so lists show and filter it without reading the history.
    last_outcome: FireOutcome | None = None
    #: Set on a *notice*: the one-shot row that delivers the ``schedule.failed`` event of a job
    #: that gave up (``"failed"``; its payload holds the event). None: an ordinary job.
    notice: str | None = None

    @classmethod
    def first_of(
        cls,
        spec: OneShotSpec | RepeatSpec,
        job_id: str,
        now: datetime,
        *,
        trace_context: str | None = None,
        past_allowed: bool = False,
    ) -> ScheduledJob:
        """The pending row of a new job at its first occurrence: the one place a job is made.

        :raises RunAtInPast: a one-shot's ``run_at`` is before ``now`` (unless ``past_allowed``:
            it then fires at once), or a repeat's first occurrence is after its ``ends_at``.
        """
        overlap: OverlapPolicy | None
        if isinstance(spec, OneShotSpec):
            if spec.run_at < now and not past_allowed:
                raise RunAtInPast(f"run_at {spec.run_at.isoformat()} is before now ({now.isoformat()})")
            first, repeat, limit, ends_at, overlap = spec.run_at, None, None, None, None
        else:
            repeat, limit, ends_at, overlap = spec.repeat, spec.limit, spec.ends_at, spec.overlap
            first = spec.first_occurrence(now)
            if ends_at is not None and first > ends_at:
                raise RunAtInPast(f"the first occurrence {first.isoformat()} is after ends_at")
        window = spread_ms(spec.spread)
        job = cls(
            id=job_id,
            topic=spec.topic,
            status=JobStatus.PENDING,
            run_at=first,
            scheduled_for=first,
            timezone=spec.timezone,
            payload=spec.payload,
            metadata=spec.metadata,
            repeat=repeat,
            retry=spec.retry,
            limit=limit,
            ends_at=ends_at,
            misfire=spec.misfire,
            concurrency=spec.concurrency,
            created_at=now,
            updated_at=now,
            trace_context=trace_context,
            overlap=overlap,
            time_limit=spec.time_limit,
            spread_ms=window,
            spread_offset_ms=0 if window is None else spread_offset_ms(spec.spread_key or job_id, window),
            jitter_ms=spread_ms(spec.jitter, "jitter"),
            calendar=spec.calendar if isinstance(spec, RepeatSpec) else None,
        )
        if isinstance(spec, RepeatSpec) and spec.calendar is not None:
            check_calendar(spec.repeat, spec.timezone, spec.calendar, first, spec.ends_at)
        return job.evolve(run_at=job.due_of(first))

    def run_for(self, run_id: str, now: datetime) -> ScheduledJob:
        """The run that fires this claimed occurrence of a repeating job with the overlap policy
        ``"allow"``: a pending one-shot ``run_id`` due at once (at the occurrence's due instant,
        ``run_at``, however long ago), with the topic, payload, metadata (without the
        ``client_request_id``, unique to this job), zone, retry policy, time limit, concurrency
        limit and trace context of this job, its ``scheduled_for`` and its occurrence number, and
        ``run_of`` this job's id. It fires however late (misfire ``fire_once``): the occurrence
        has started."""
        assert self.repeat is not None and self.overlap == "allow", "only an 'allow' job spawns runs"
        return ScheduledJob(
            id=run_id,
            topic=self.topic,
            status=JobStatus.PENDING,
            run_at=self.run_at,
            timezone=self.timezone,
            payload=self.payload,
            metadata=dataclasses.replace(self.metadata, client_request_id=None),
            repeat=None,
            retry=self.retry,
            scheduled_for=self.scheduled_for,
            occurrence=self.occurrence,
            created_at=now,
            updated_at=now,
            trace_context=self.trace_context,
            concurrency=self.concurrency,
            time_limit=self.time_limit,
            run_of=self.id,
        )

    @property
    def spread_offset(self) -> timedelta:
        """How long after its nominal instant every occurrence is due (the spread offset)."""
        return timedelta(milliseconds=self.spread_offset_ms)

    def due_of(self, nominal: datetime) -> datetime:
        """When the occurrence at ``nominal`` is due: plus the spread offset, plus a random jitter
        drawn now (never earlier than ``nominal``)."""
        if self.spread_offset_ms == 0 and not self.jitter_ms:
            return nominal
        jitter = random.randrange(self.jitter_ms) if self.jitter_ms else 0
        delay = timedelta(milliseconds=self.spread_offset_ms + jitter)
        return timing.MAX_INSTANT if nominal > timing.MAX_INSTANT - delay else nominal + delay

    def excludes(self, nominal: datetime) -> bool:
        """Whether the occurrence at ``nominal`` falls on a date this job's calendar excludes
        (its local date in :attr:`zone_for_repeat`).

        :raises InvalidCalendar: the calendar cannot be read in this process.
        """
        if self.calendar is None:
            return False
        local = timing.local_time(nominal, timing.zone(self.zone_for_repeat))
        return self.calendar.excludes(local.date())

    @property
    def is_repeating(self) -> bool:
        return self.repeat is not None

    @property
    def zone_for_repeat(self) -> str:
        """The zone this job's repeat is evaluated in (:func:`repeat_zone`)."""
        return repeat_zone(self.repeat, self.timezone)

    def next_occurrence_after(self, after: datetime) -> datetime:
        """This repeating job's first occurrence strictly after ``after`` (``scheduled_for`` is
        always on an interval's fixed-rate grid, so it anchors the grid)."""
        assert self.repeat is not None, "a one-shot job has no next occurrence"
        return next_occurrence(self.repeat, self.timezone, self.scheduled_for, after)

    def pending_at(self, occurrence: int, attempt: int) -> bool:
        """Whether this job waits to fire exactly this attempt of this occurrence (a queue entry
        for it is still wanted)."""
        return self.status is JobStatus.PENDING and (self.occurrence, self.attempt) == (occurrence, attempt)

    def evolve(self, **changes: Any) -> ScheduledJob:
        """A copy with ``changes`` applied (fields by name).

        Copied slot by slot: a ScheduledJob has no ``__post_init__`` (nothing is derived or
        checked at construction), so this is ``dataclasses.replace`` without its per-field
        bookkeeping and keyword parsing, under half its cost; every fire's outcome is one.

        :raises TypeError: a name in ``changes`` is not a field."""
        if not changes.keys() <= _JOB_FIELD_SET:
            unknown = ", ".join(sorted(changes.keys() - _JOB_FIELD_SET))
            raise TypeError(f"ScheduledJob has no field {unknown}")
        copy = object.__new__(ScheduledJob)
        for name, value in zip(_JOB_FIELDS, _job_values(self), strict=True):
            _set_slot(copy, name, value)
        for name, value in changes.items():
            _set_slot(copy, name, value)
        return copy

    def requeued(self, run_at: datetime, now: datetime) -> ScheduledJob:
        """This finished job pending again as a new occurrence (the next number, attempt 1) due
        at ``run_at``: the one move out of a finished status, made only by an operator's
        ``requeue``. The status table keeps finished statuses final for every other move; the
        fire history of earlier occurrences is kept."""
        assert self.status in FINISHED_STATUSES, "only a finished job is requeued"
        return self.evolve(
            status=JobStatus.PENDING,
            occurrence=self.occurrence + 1,
            attempt=1,
            run_at=run_at,
            scheduled_for=run_at,
            regular_due=None,
            claimed_by=None,
            claimed_until=None,
            updated_at=now,
        )

    def moved(self, status: JobStatus, now: datetime, **changes: Any) -> ScheduledJob:
        """A copy moved to ``status`` at ``now`` (with ``changes``): every status change goes
        through the transition table.

        :raises InvalidTransition: the table does not allow this move.
        """
        check_transition(self.status, status)
        return self.evolve(status=status, updated_at=now, **changes)


def outcome_note(job: ScheduledJob) -> str:
    """How the job's last attempt ended, in parentheses, when that is news (``(unheard)``,
    ``(failed)`` for a retry due, ``(timeout)``, ``(skipped)``); empty after a success, before
    the first fire, or for a failed job's failure."""
    last = job.last_outcome
    if last is None or last is FireOutcome.SUCCEEDED:
        return ""
    if last is FireOutcome.FAILED and job.status is JobStatus.FAILED:
        return ""
    return f"({last.value})"


def role_note(job: ScheduledJob) -> str:
    """What a row is for when it is no job of the app's own, in parentheses: a notice row that
    delivers a give-up's ``schedule.failed`` event is ``(notice: schedule.failed)``; empty for
    every other row."""
    return f"(notice: schedule.{job.notice})" if job.notice is not None else ""


def shown_status(job: ScheduledJob) -> str:
    """The status a list shows: the job's, then :func:`role_note` and :func:`outcome_note`
    (``completed (unheard)``, ``pending (notice: schedule.failed)``)."""
    return " ".join(filter(None, (job.status.value, role_note(job), outcome_note(job))))


assert not hasattr(ScheduledJob, "__post_init__"), "ScheduledJob.evolve copies slots without __init__"
_JOB_FIELDS = tuple(f.name for f in dataclasses.fields(ScheduledJob))
_JOB_FIELD_SET = frozenset(_JOB_FIELDS)
_job_values = operator.attrgetter(*_JOB_FIELDS)
_set_slot = object.__setattr__  # a frozen dataclass's own way of setting its fields


#: The fields of a ScheduledJob that change after it is created (what a guarded update writes).
MUTABLE_FIELDS: tuple[str, ...] = (
    "status",
    "run_at",
    "scheduled_for",
    "occurrence",
    "attempt",
    "occurrence_count",
    "last_fired_at",
    "last_error",
    "claimed_by",
    "claimed_until",
    "updated_at",
    "rescheduled_to",
    "regular_due",
    "last_outcome",
)


def request_key(metadata: JobMetadata) -> tuple[str | None, str] | None:
    """What a ``client_request_id`` is unique by: ``(tenant_id, client_request_id)`` (the tenant
    None for the jobs without one); None when the job has no client request id."""
    if metadata.client_request_id is None:
        return None
    return metadata.tenant_id, metadata.client_request_id


def repeated_request_id(jobs: Sequence[ScheduledJob]) -> tuple[tuple[str | None, str], int] | None:
    """The first ``(tenant_id, client_request_id)`` used twice among ``jobs``, with the position
    of its second use, or None (one bulk insert must refuse it as a clash with another job)."""
    first_use: dict[tuple[str | None, str], int] = {}
    for index, job in enumerate(jobs):
        key = request_key(job.metadata)
        if key is not None and first_use.setdefault(key, index) != index:
            return key, index
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class JobPage:
    """One page of :meth:`ScheduleService.list`; pass ``next_cursor`` to get the next (None: last page)."""

    items: list[ScheduledJob]
    next_cursor: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class JobQuery:
    """Filters for listing jobs; every given field must match. Ordered by id (creation order)."""

    owner_id: str | None = None
    tenant_id: str | None = None
    topic: str | None = None
    statuses: frozenset[JobStatus] = frozenset()
    #: The jobs whose last attempt ended so (``ScheduledJob.last_outcome``); empty: any.
    outcomes: frozenset[FireOutcome] = frozenset()
    limit: int = 20
    after_id: str | None = None
