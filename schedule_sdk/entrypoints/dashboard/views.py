"""What the pages show of a job: its actions, its schedule and calendar as text, its payload,
the defaults of its reschedule form."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from schedule_sdk.core.service import ScheduleService
from schedule_sdk.domain import timing
from schedule_sdk.domain.calendars import Calendar
from schedule_sdk.domain.jobs import CronRepeat, IntervalRepeat, ScheduledJob
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.time_limits import limit_ms
from schedule_sdk.domain.timers import TIMER_TOPIC
from schedule_sdk.entrypoints.dashboard import plots

#: action -> (button label, the statuses it applies to, what the confirmation asks)
ACTIONS: dict[str, tuple[str, frozenset[JobStatus], str]] = {
    "trigger": ("Trigger now", frozenset({JobStatus.PENDING}), "Fire this job now, as one extra fire?"),
    "pause": ("Pause", frozenset({JobStatus.PENDING, JobStatus.ACTIVE}), "Hold this job until resumed?"),
    "resume": ("Resume", frozenset({JobStatus.PAUSED}), "Let this job fire again?"),
    "reschedule": (
        "Reschedule",
        frozenset({JobStatus.PENDING, JobStatus.ACTIVE, JobStatus.PAUSED}),
        "Replace this job with a new one on this schedule (a new id; this one is cancelled)?",
    ),
    "cancel": (
        "Cancel",
        frozenset({JobStatus.PENDING, JobStatus.ACTIVE, JobStatus.PAUSED}),
        "Cancel this job? It will never fire again.",
    ),
}
if hasattr(ScheduleService, "requeue"):  # the service's re-run of a finished job
    ACTIONS["requeue"] = (
        "Requeue",
        frozenset({JobStatus.FAILED, JobStatus.COMPLETED, JobStatus.CANCELLED}),
        "Run this job again (a new occurrence; its history is kept)?",
    )
#: The actions the jobs list applies to a selection of jobs, with one confirmation.
BULK_ACTIONS = tuple(a for a in ("cancel", "pause", "resume", "requeue") if a in ACTIONS)
_TIMER_JOB = (
    "This job belongs to a timer (tenant {tenant}, service call {call}): steer it through the timer "
    "(send it a ScheduleTimer command), so that the timer never claims a job it does not have."
)


def actions_for(job: ScheduledJob) -> list[tuple[str, str]]:
    if timer_note(job) is not None:
        return []
    return [(name, label) for name, (label, applies, _) in ACTIONS.items() if job.status in applies]


def timer_note(job: ScheduledJob) -> str | None:
    """Why this job may not be steered here (it is a timer's), or None."""
    if job.topic != TIMER_TOPIC:
        return None
    payload = job.payload or {}
    return _TIMER_JOB.format(tenant=payload.get("tenantId", "?"), call=payload.get("serviceCallId", "?"))


def pretty(payload: object) -> str:
    return "" if payload is None else json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True)


def spec_text(job: ScheduledJob) -> dict[str, str]:
    spec: dict[str, str] = {"kind": "one-shot" if job.repeat is None else "repeating"}
    if isinstance(job.repeat, CronRepeat):
        spec["cron"] = f"{job.repeat.expression} ({job.zone_for_repeat})"
    elif isinstance(job.repeat, IntervalRepeat):
        spec["every"] = plots._ms(job.repeat.every_ms)
    backoff = job.retry.backoff
    spec["retry"] = f"{job.retry.attempts} attempt(s), {backoff.type} {backoff.delay_ms} ms"
    spec["misfire"] = json.dumps(job.misfire.to_dict(), sort_keys=True)
    if job.time_limit is not None:
        spec["time limit"] = f"{limit_ms(job.time_limit) / 1000:g} s"
    if job.concurrency is not None:
        spec["concurrency"] = f"key {job.concurrency.key}, at most {job.concurrency.limit} at once"
    if job.limit is not None:
        spec["limit"] = str(job.limit)
    if job.ends_at is not None:
        spec["ends at"] = job.ends_at.isoformat()
    if job.repeat is not None:
        spec["overlap"] = job.overlap or "none (the misfire policy decides)"
    if job.spread_ms is not None:
        window, offset = plots._ms(job.spread_ms), plots._ms(job.spread_offset_ms)
        spec["spread"] = f"window {window}, this job +{offset} after each nominal time"
    if job.jitter_ms is not None:
        spec["jitter"] = f"random 0 to {plots._ms(job.jitter_ms)} per occurrence (not previewable)"
    if job.calendar is not None:
        spec["calendar"] = calendar_text(job.calendar)
    return spec


def calendar_text(calendar: Calendar) -> str:
    """What a calendar excludes, in words (dates are local dates in the cron's zone)."""
    parts = []
    if calendar.weekdays:
        parts.append("every " + ", ".join(_WEEKDAYS[int(w)] for w in sorted(calendar.to_dict()["weekdays"])))
    if calendar.holidays is not None:
        where = calendar.holidays.country + (
            f"-{calendar.holidays.subdivision}" if calendar.holidays.subdivision else ""
        )
        parts.append(f"public holidays of {where}")
    if calendar.dates:
        dates = sorted(calendar.to_dict()["dates"])
        parts.append(
            ", ".join(dates[:10]) + (f" and {len(dates) - 10} more dates" if len(dates) > 10 else "")
        )
    return "excludes " + "; ".join(parts)


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def not_now(job: ScheduledJob) -> dict[str, Any]:
    """The job's spread window, jitter and calendar, carried over to its replacement (the spread
    offset of the replacement comes from its own id)."""
    options: dict[str, Any] = {}
    if job.spread_ms is not None:
        options["spread"] = timedelta(milliseconds=job.spread_ms)
    if job.jitter_ms is not None:
        options["jitter"] = timedelta(milliseconds=job.jitter_ms)
    if job.calendar is not None and job.repeat is not None:
        options["calendar"] = job.calendar
    return options


def reschedule_defaults(job: ScheduledJob) -> dict[str, str]:
    """The reschedule form's fields, filled with the job's values: its zone (a cron's own zone
    when it has one), its schedule and its payload."""
    values = {"zone": job.zone_for_repeat, "payload": pretty(job.payload)}
    if job.repeat is not None:
        values["overlap"] = job.overlap or ""
    values["time_limit_seconds"] = "" if job.time_limit is None else f"{limit_ms(job.time_limit) / 1000:g}"
    if isinstance(job.repeat, CronRepeat):
        values["cron"] = job.repeat.expression
    elif isinstance(job.repeat, IntervalRepeat):
        values["every_seconds"] = f"{job.repeat.every_ms / 1000:g}"
    else:
        try:
            wall = job.run_at.astimezone(timing.zone(job.timezone))
        except OverflowError:
            wall = job.run_at
        values["run_at"] = wall.strftime("%Y-%m-%dT%H:%M:%S")
    return values
