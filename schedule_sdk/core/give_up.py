"""What a failed attempt leads to beyond its outcome: the log line of a retry or a give-up, and
the notice that delivers a give-up's ``schedule.failed`` event.

A give-up (a failed attempt its retry policy does not retry) inserts a *notice*: a one-shot row
(``ScheduledJob.notice == "failed"``) due at once, whose payload holds the event, written by
:meth:`~schedule_sdk.core.firing.Firing.record` in the transaction that records the give-up and
handed to the queue like any next occurrence. Its fire publishes the event
(``EventPublisher.publish_failed``) instead of an arrived one; a listener that raises fails that
fire, which :data:`NOTICE_RETRY` repeats. So the event is delivered at least once, whatever
process dies between the give-up and the delivery. A notice that gives up spawns none. A
notice's fire is not counted in the fire metrics nor written to the fire history (it is no fire
of its topic): its row keeps how its delivery went (``last_outcome``, ``last_error``, ``attempt``).
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime
from typing import Any

from schedule_sdk.domain.events import MAX_FAILED_TRACEBACK, ScheduleFailedEvent
from schedule_sdk.domain.ids import new_id
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.retry import Backoff, RetryPolicy, error_name, raised_errors
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.timers import TIMER_TOPIC

logger = logging.getLogger("schedule_sdk.core.firing")

#: ``ScheduledJob.notice`` of a row that delivers a ``schedule.failed`` event.
FAILED_NOTICE = "failed"
#: How a notice's fire is retried when a ``schedule.failed`` listener raises: exponential
#: backoff, capped, over a span long enough to outlast a dead-letter sink's restart.
NOTICE_RETRY = RetryPolicy(
    attempts=10, backoff=Backoff(type="exponential", delay_ms=1000, max_delay_ms=300_000)
)


def described(error: BaseException, limit: int = 2000) -> str:
    """``Type: message`` of each error an attempt raised (each listener's, ``; ``-separated)."""
    return "; ".join(f"{type(e).__name__}: {e}" for e in raised_errors(error))[:limit]


def failed_event(
    job: ScheduledJob, fired_at: datetime, error: BaseException, traceback: str | None, now: datetime
) -> ScheduleFailedEvent:
    """The ``schedule.failed`` event of ``job``'s attempt that failed with ``error`` and gave up
    (a run's names the job it runs for, like its arrived event)."""
    kinds = dict.fromkeys(error_name(type(e)) for e in raised_errors(error))
    return ScheduleFailedEvent(
        scheduled_job_id=job.run_of or job.id,
        topic=job.topic,
        user_payload=job.payload,
        metadata=job.metadata,
        timezone=job.timezone,
        scheduled_for=job.scheduled_for,
        fired_at=fired_at,
        attempt=job.attempt,
        occurrence=job.occurrence,
        error_type=", ".join(kinds),
        error_message=described(error),
        traceback=None if traceback is None else traceback[-MAX_FAILED_TRACEBACK:],
        failed_at=now,
    )


def failed_notice(job: ScheduledJob, event: ScheduleFailedEvent, now: datetime) -> ScheduledJob:
    """The notice row that delivers ``event``: a pending one-shot due ``now`` with ``job``'s
    topic, zone, metadata (without the ``client_request_id``, unique to the job; for a timer's
    job without the ``owner_id`` too, which names the timer its row arms) and trace context, the
    event in its payload, retried by :data:`NOTICE_RETRY`."""
    metadata = dataclasses.replace(job.metadata, client_request_id=None)
    if job.topic == TIMER_TOPIC:
        metadata = dataclasses.replace(metadata, owner_id=None)
    return ScheduledJob(
        id=new_id(),
        topic=job.topic,
        status=JobStatus.PENDING,
        run_at=now,
        scheduled_for=now,
        timezone=job.timezone,
        payload={"event": event.to_dict()},
        metadata=metadata,
        repeat=None,
        retry=NOTICE_RETRY,
        created_at=now,
        updated_at=now,
        trace_context=job.trace_context,
        notice=FAILED_NOTICE,
    )


def notice_event(job: ScheduledJob) -> ScheduleFailedEvent:
    """The event a notice row delivers."""
    assert job.notice == FAILED_NOTICE and job.payload is not None, "not a notice row"
    data: Any = job.payload["event"]
    return ScheduleFailedEvent.from_dict(data)


def _seconds(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.3g} s"


def log_retry(
    job: ScheduledJob, outcome: ScheduledJob, error: BaseException, ended: datetime, fields: dict[str, object]
) -> None:
    """``job X attempt 1/3 failed: ConnectionError: ...; retrying in 1 s``."""
    wait = max(0.0, (outcome.run_at - ended).total_seconds() * 1000)
    logger.warning(
        "job %s attempt %d/%d failed: %s; retrying in %s",
        job.run_of or job.id,
        job.attempt,
        job.retry.attempts,
        described(error),
        _seconds(wait),
        extra=fields,
    )


def log_give_up(job: ScheduledJob, error: BaseException, fields: dict[str, object]) -> None:
    """``job X gave up after 3 attempts: ...`` (and why, when attempts were left)."""
    left = job.attempt < job.retry.attempts
    logger.error(
        "job %s gave up after %d attempt%s: %s%s",
        job.run_of or job.id,
        job.attempt,
        "" if job.attempt == 1 else "s",
        described(error),
        f" (its retry policy does not retry this error; {job.retry.attempts} attempts allowed)"
        if left
        else "",
        extra=fields,
    )
