"""The one fire path every substrate uses: run the listeners of a claimed job, then record the
outcome (completed, retry with backoff, failed, or the next occurrence of a repeating job).

A fire starts from a *claimed* row (status ``active``, claimed by this worker), so a cancelled or
already-fired job can never fire; the outcome is written only if the row is still claimed by
this worker for the same occurrence, so a cancel that lands mid-fire wins.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from .adapters.metrics import NoMetrics
from .domain import timing
from .domain.errors import ListenerFailed
from .domain.events import ScheduleArrivedEvent
from .domain.jobs import CronRepeat, IntervalRepeat, ScheduledJob
from .domain.status import JobStatus
from .ports import Clock, EventPublisher, ExecutionQueue, Guard, JobStore, Metrics, Occurrence

logger = logging.getLogger(__name__)

_ACTIVE = frozenset({JobStatus.ACTIVE})
MAX_ERROR_LENGTH = 2000


@dataclass(frozen=True, slots=True)
class FireResult:
    """A finished fire: the job as claimed, and the state to record."""

    claimed: ScheduledJob
    outcome: ScheduledJob


def arrived_event(job: ScheduledJob, fired_at: datetime) -> ScheduleArrivedEvent:
    return ScheduleArrivedEvent(
        scheduled_job_id=job.id,
        topic=job.topic,
        user_payload=job.payload,
        metadata=job.metadata,
        timezone=job.timezone,
        scheduled_for=job.scheduled_for,
        fired_at=fired_at,
        attempt=job.attempt,
        occurrence=job.occurrence,
    )


def next_occurrence_after(job: ScheduledJob, after: datetime) -> datetime:
    """The repeating job's first occurrence strictly after ``after``."""
    repeat = job.repeat
    if isinstance(repeat, CronRepeat):
        return timing.next_cron_time(repeat.expression, job.zone_for_repeat, after)
    assert isinstance(repeat, IntervalRepeat)
    # scheduled_for is always on the fixed-rate grid, so it serves as the anchor.
    return timing.next_interval_time(job.scheduled_for, repeat.every_ms, after)


def outcome_of(
    job: ScheduledJob, fired_at: datetime, error: BaseException | None, now: datetime
) -> ScheduledJob:
    """The state to record after attempt ``job.attempt`` of occurrence ``job.occurrence`` ran.

    Success completes a one-shot and moves a repeating job to its next occurrence (one catch-up
    fire after downtime, then the first occurrence after now). A failure is retried with
    backoff while attempts remain; then a one-shot fails and a repeating series continues.
    """
    released = {"claimed_by": None, "claimed_until": None, "updated_at": now, "last_fired_at": fired_at}
    if error is not None and job.attempt < job.retry.attempts:
        retry_at = now + timedelta(milliseconds=job.retry.backoff.delay_after(job.attempt))
        return job.evolve(
            status=JobStatus.PENDING,
            attempt=job.attempt + 1,
            run_at=retry_at,
            last_error=_describe(error),
            **released,
        )
    last_error = None if error is None else _describe(error)
    finished = job.occurrence_count + 1
    if job.repeat is None:
        status = JobStatus.COMPLETED if error is None else JobStatus.FAILED
        return job.evolve(status=status, occurrence_count=finished, last_error=last_error, **released)
    following = next_occurrence_after(job, max(job.scheduled_for, fired_at, now))
    ended = (job.limit is not None and finished >= job.limit) or (
        job.ends_at is not None and following > job.ends_at
    )
    if ended:
        return job.evolve(
            status=JobStatus.COMPLETED, occurrence_count=finished, last_error=last_error, **released
        )
    return job.evolve(
        status=JobStatus.PENDING,
        occurrence=job.occurrence + 1,
        attempt=1,
        occurrence_count=finished,
        run_at=following,
        scheduled_for=following,
        last_error=last_error if error is not None else job.last_error,
        **released,
    )


def fire_outcome(job: ScheduledJob, outcome: ScheduledJob, failed: bool) -> str:
    """What a fire led to: ``completed`` (the job is done), ``next`` (a repeating job moved on
    after a success), ``retry`` (a failure to be retried) or ``failed`` (a failure out of
    attempts; a repeating job still moves on)."""
    if not failed:
        return "completed" if outcome.status is JobStatus.COMPLETED else "next"
    same = (outcome.occurrence, outcome.status) == (job.occurrence, JobStatus.PENDING)
    return "retry" if same and outcome.attempt > job.attempt else "failed"


def job_fields(job: ScheduledJob) -> dict[str, object]:
    """The structured fields of every log line about a job (``extra=``)."""
    return {"job_id": job.id, "occurrence": job.occurrence, "attempt": job.attempt, "topic": job.topic}


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:MAX_ERROR_LENGTH]


class Firing:
    """Runs claimed jobs' listeners and records their outcomes."""

    def __init__(
        self,
        *,
        store: JobStore,
        queue: ExecutionQueue,
        publisher: EventPublisher,
        clock: Clock,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._queue = queue
        self._publisher = publisher
        self._clock = clock
        self._metrics = metrics or NoMetrics()

    def run(self, job: ScheduledJob) -> FireResult:
        """Emit the arrived event for a claimed job; never raises for a listener's error."""
        fired_at = self._clock.now()
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            self._publisher.publish(arrived_event(job, fired_at))
        except ListenerFailed as failed:
            error = failed
        except Exception as unexpected:  # a publisher fault (e.g. a broker) also fails the attempt
            logger.exception("publishing job %s failed", job.id, extra=job_fields(job))
            error = unexpected
        duration = time.perf_counter() - started
        outcome = outcome_of(job, fired_at, error, self._clock.now())
        self._count(job, outcome, error is not None, (fired_at - job.run_at).total_seconds(), duration)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("fired job %s in %.1f ms", job.id, duration * 1000, extra=job_fields(job))
        return FireResult(job, outcome)

    def _count(
        self, job: ScheduledJob, outcome: ScheduledJob, failed: bool, late: float, took: float
    ) -> None:
        """Metrics of one fire (issue 12): counters and two histogram samples, no I/O."""
        kind = fire_outcome(job, outcome, failed)
        metrics, topic = self._metrics, job.topic
        metrics.increment("schedule.jobs.fired", topic=topic, outcome=kind)
        if failed:
            metrics.increment("schedule.jobs.failed", topic=topic)
            if kind == "retry":
                metrics.increment("schedule.jobs.retried", topic=topic)
        metrics.observe("schedule.fire.lateness", max(0.0, late), topic=topic)
        metrics.observe("schedule.listener.duration", took, topic=topic, outcome=kind)

    def record(self, results: Sequence[FireResult]) -> None:
        """Write outcomes in one transaction, handing next occurrences and retries to the queue
        inside it (the write order); rows no longer claimed by the firing worker are left alone.

        :raises StoreUnavailable, QueueUnavailable: nothing was recorded; the fires will repeat
            once their claims expire (at-least-once).
        """
        if not results:
            return
        following = [Occurrence.of(r.outcome) for r in results if r.outcome.status is JobStatus.PENDING]
        changes = [
            (r.outcome, Guard(_ACTIVE, claimed_by=r.claimed.claimed_by, occurrence=r.claimed.occurrence))
            for r in results
        ]
        enqueued = False
        try:
            with self._store.transaction() as tx:
                tx.update_many(changes)
                self._queue.enqueue(following)
                enqueued = True
        except BaseException:
            if enqueued:
                self._queue.withdraw(following)
            raise
        self._queue.committed(following)

    def fire(self, job: ScheduledJob) -> FireResult:
        """Run and record one claimed job (the path of substrates that fire one job at a time)."""
        result = self.run(job)
        self.record([result])
        return result
