"""Reading what a visitor sends: query strings and forms into checked values (a search, a
cursor, a new schedule, a payload, a time limit), each refused with a validation error
before it reaches the service or the store."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from schedule_sdk.domain import timing
from schedule_sdk.domain.errors import (
    InvalidCursor,
    InvalidInterval,
    InvalidPayload,
    InvalidTimeLimit,
    ScheduleValidationError,
)
from schedule_sdk.domain.history import parse_outcome
from schedule_sdk.domain.ids import ID_PATTERN
from schedule_sdk.domain.jobs import (
    MAX_METADATA_LENGTH,
    MAX_TOPIC_LENGTH,
    CronRepeat,
    IntervalRepeat,
    JobSpec,
    OneShotSpec,
    RepeatSpec,
    ScheduledJob,
    check_overlap,
)
from schedule_sdk.domain.overview import JOB_SORTS, MAX_SEARCH_TEXT, JobSearch
from schedule_sdk.domain.status import JobStatus, parse_status
from schedule_sdk.domain.text import shown, unstorable_character
from schedule_sdk.domain.time_limits import MAX_TIME_LIMIT, check_time_limit
from schedule_sdk.entrypoints.dashboard.security import Grant
from schedule_sdk.entrypoints.dashboard.views import not_now

PAGE_SIZE = 50
#: A job id as the pages and cursors take it.
UUID = ID_PATTERN
#: The longest interval the reschedule form takes (about ten years), in seconds.
MAX_INTERVAL_SECONDS = 10 * 366 * 86_400
#: Nesting deeper than this in a payload typed into the reschedule form is refused.
MAX_PAYLOAD_DEPTH = 64


def int_of(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None and len(value) < 12 else default
    except ValueError:
        return default


def text_of(value: str | None, what: str, max_length: int) -> str | None:
    """A text input, stripped (None when empty).

    :raises ScheduleValidationError: it holds a NUL or a lone surrogate, or is too long.
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    problem = unstorable_character(value)
    if problem is not None:
        raise ScheduleValidationError(f"{what} holds {problem}")
    if len(value) > max_length:
        raise ScheduleValidationError(f"{what} is longer than {max_length:,} characters")
    return value


def search_of(form: Mapping[str, str], grant: Grant, cursor: str | None) -> JobSearch:
    """The jobs list's query from its form (one page and one more row, to tell "more").

    :raises ScheduleValidationError: a field is not valid (an InvalidStatus or InvalidCursor too).
    """
    status_text = text_of(form.get("status"), "status", 16)
    statuses: frozenset[JobStatus] = frozenset()
    if status_text is not None:
        statuses = frozenset({parse_status(status_text)})
    outcome_text = text_of(form.get("outcome"), "outcome", 16)
    outcomes = frozenset() if outcome_text is None else frozenset({parse_outcome(outcome_text)})
    sort = form.get("sort") or "created"
    if sort not in JOB_SORTS:
        raise ScheduleValidationError(f"sort by one of {', '.join(JOB_SORTS)}, not {shown(sort)}")
    order = form.get("order") or ("asc" if sort == "due" else "desc")
    if order not in ("asc", "desc"):
        raise ScheduleValidationError(f"order is asc or desc, not {shown(order)}")
    return JobSearch(
        statuses=statuses,
        outcomes=outcomes,
        topic=text_of(form.get("topic"), "topic", MAX_TOPIC_LENGTH),
        owner_id=text_of(form.get("owner_id"), "owner", MAX_METADATA_LENGTH),
        tenant_id=text_of(form.get("tenant_id"), "tenant", MAX_METADATA_LENGTH),
        tenants=grant.tenants,
        text=text_of(form.get("q"), "search text", MAX_SEARCH_TEXT),
        sort=sort,
        ascending=order == "asc",
        limit=PAGE_SIZE + 1,
        after=decode_cursor(cursor, sort),
    )


def encode_cursor(sort: str, job: ScheduledJob) -> str:
    value = {"created": "", "due": job.run_at.isoformat(), "updated": job.updated_at.isoformat()}[sort]
    return base64.urlsafe_b64encode(json.dumps([value, job.id]).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None, sort: str) -> tuple[str, str] | None:
    if not cursor:
        return None
    try:
        if len(cursor) > 400:
            raise ValueError("too long")
        value, job_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(value, str) or not isinstance(job_id, str) or not UUID.fullmatch(job_id):
            raise ValueError("not a position")
        if sort != "created" and datetime.fromisoformat(value).tzinfo is None:
            raise ValueError("not an instant")
    except (ValueError, TypeError, binascii.Error, UnicodeError) as error:
        raise InvalidCursor(f"the page cursor is not one this list gave ({error})") from None
    return value, job_id


def json_depth(value: object, limit: int) -> int:
    """The nesting depth of a parsed JSON value, stopping at ``limit + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return depth
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return deepest


def payload_of(text: str | None) -> Any:
    """The payload typed into the form (JSON object; empty: none)."""
    if text is None:
        return None
    if text.count("[") + text.count("{") > 100_000:
        raise InvalidPayload("the payload nests too deeply")
    try:
        payload = json.loads(text)
    except RecursionError:
        raise InvalidPayload(f"the payload nests deeper than {MAX_PAYLOAD_DEPTH} levels") from None
    except ValueError as error:
        raise InvalidPayload(f"the payload is not JSON: {error}") from None
    if json_depth(payload, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
        raise InvalidPayload(f"the payload nests deeper than {MAX_PAYLOAD_DEPTH} levels")
    return payload


def reschedule_spec(job: ScheduledJob, form: Mapping[str, str]) -> JobSpec:
    """The replacement's spec: the job's own, with the zone, schedule (a one-shot's new wall
    time in the zone, a cron expression, or an interval in seconds), payload and a repeating
    job's overlap policy (empty: none) from the form.
    The client request id is not carried over (it stays with the cancelled job).

    :raises ScheduleValidationError: a field is invalid (the spec's own checks, and overflow).
    """
    meta = job.metadata.__class__(
        owner_id=job.metadata.owner_id,
        tenant_id=job.metadata.tenant_id,
        correlation_id=job.metadata.correlation_id,
    )
    zone_name = text_of(form.get("zone"), "zone", 64) or job.zone_for_repeat
    common: dict[str, Any] = {
        "topic": job.topic,
        "timezone": job.timezone,
        "payload": payload_of(text_of(form.get("payload"), "payload", 1 << 20))
        if "payload" in form
        else job.payload,
        "metadata": meta,
        "retry": job.retry,
        "misfire": job.misfire,
        "time_limit": time_limit_of(form.get("time_limit_seconds"), job.time_limit),
        **not_now(job),
        "concurrency": job.concurrency,
    }
    if job.repeat is None:
        common["timezone"] = zone_name
        text = form.get("run_at", "").strip()
        try:
            wall = datetime.fromisoformat(text)
        except ValueError:
            raise ScheduleValidationError(f"run_at {shown(text)} is not a date and time") from None
        if wall.tzinfo is not None:
            raise ScheduleValidationError("give the wall time without an offset; it is read in the zone")
        timing.zone(zone_name)  # InvalidTimezone first
        try:
            run_at = timing.wall_instant(wall, zone_name)
            run_at.astimezone(UTC)
        except OverflowError:
            raise ScheduleValidationError(f"run_at {shown(text)} in {zone_name} is out of range") from None
        return OneShotSpec(run_at=run_at, **common)
    if isinstance(job.repeat, CronRepeat):
        if job.repeat.timezone is None:
            common["timezone"] = zone_name
        repeat: CronRepeat | IntervalRepeat = CronRepeat(
            expression=form.get("cron", job.repeat.expression).strip(),
            timezone=zone_name if job.repeat.timezone is not None else None,
        )
    else:
        common["timezone"] = zone_name
        text = form.get("every_seconds", f"{job.repeat.every_ms / 1000:g}").strip()
        try:
            seconds = float(text) if len(text) < 40 else math.nan
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and 0 < seconds <= MAX_INTERVAL_SECONDS):
            raise InvalidInterval(
                f"every_seconds must be a number of seconds from 0.001 to {MAX_INTERVAL_SECONDS:,}, "
                f"not {shown(text)}"
            )
        repeat = IntervalRepeat(every_ms=round(seconds * 1000))
    overlap = check_overlap(text_of(form.get("overlap"), "overlap", 16)) if "overlap" in form else job.overlap
    return RepeatSpec(repeat=repeat, limit=job.limit, ends_at=job.ends_at, overlap=overlap, **common)


def time_limit_of(text: str | None, kept: timedelta | None) -> timedelta | None:
    """The time limit typed into the reschedule form, in seconds (empty: none; no field: the
    job's own, ``kept``).

    :raises InvalidTimeLimit: not a number of seconds from 0.001 to 7 days.
    """
    if text is None:
        return kept
    text = text.strip()
    if not text:
        return None
    try:
        seconds = float(text) if len(text) < 20 else math.nan
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIME_LIMIT.total_seconds()):
        raise InvalidTimeLimit(f"time_limit_seconds must be from 0.001 to 604,800 seconds, not {shown(text)}")
    return check_time_limit(timedelta(milliseconds=round(seconds * 1000)), "time_limit_seconds")


def timer_cursor(due: str | None, call: str | None) -> tuple[datetime, str] | None:
    """The timers page's position: a due instant and a service call id.

    :raises InvalidCursor: the instant is not an aware one within range, or the call id is bad.
    """
    if not due or call is None:
        return None
    try:
        instant = datetime.fromisoformat(due[:64])
        if instant.tzinfo is None:
            raise ValueError("no offset")
        instant = instant.astimezone(UTC)
    except (ValueError, OverflowError) as error:
        raise InvalidCursor(f"after_due is not an instant this page gave ({error})") from None
    call_id = text_of(call, "after_call", MAX_METADATA_LENGTH)
    if call_id is None:
        return None
    return instant, call_id
