"""The one fire path every substrate uses: run the listeners of a claimed job, then record the
outcome (completed, retry with backoff, failed, or the next occurrence of a repeating job).

A fire starts from a *claimed* row (status ``active``, claimed by this worker), so a cancelled,
paused or already-fired job can never fire; the outcome is written only if the row is still
claimed by this worker for the same occurrence, so a cancel or a pause that lands mid-fire wins.
The job's misfire policy (:mod:`schedule_sdk.domain.misfire`) decides whether a late occurrence fires;
occurrences that do not fire are reported as a ``schedule.missed`` event.

A fire that no listener heard (the publisher reports 0 listeners) is recorded with the outcome
``unheard``, counted as ``schedule.jobs.unheard`` and logged once per topic by each fire path; the
job moves on as after a success, or, with ``unheard_fails``, the attempt fails and its retry
policy applies.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from schedule_sdk.core.unobserved import NoMetrics, NoTracing
from schedule_sdk.core.write_order import write_order
from schedule_sdk.domain import misfire
from schedule_sdk.domain.errors import ListenerFailed, UnheardFire
from schedule_sdk.domain.events import ScheduleArrivedEvent, ScheduleMissedEvent
from schedule_sdk.domain.history import FireOutcome, FireRecord, capped_traceback
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.misfire import Missed
from schedule_sdk.domain.status import JobStatus, check_transition
from schedule_sdk.ports import (
    Clock,
    EventPublisher,
    ExecutionQueue,
    FireHistory,
    FirePath,
    FireResult,
    Guard,
    JobStore,
    Metrics,
    Occurrence,
    Tracing,
)

logger = logging.getLogger(__name__)

_ACTIVE = frozenset({JobStatus.ACTIVE})
MAX_ERROR_LENGTH = 2000


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


def outcome_of(
    job: ScheduledJob, fired_at: datetime, error: BaseException | None, now: datetime
) -> ScheduledJob:
    """The state to record after attempt ``job.attempt`` of occurrence ``job.occurrence`` ran
    (:func:`settle` without the missed occurrences)."""
    return settle(job, fired_at, error, now)[0]


def settle(
    job: ScheduledJob, fired_at: datetime | None, error: BaseException | None, now: datetime
) -> tuple[ScheduledJob, Missed]:
    """The state to record after attempt ``job.attempt`` of occurrence ``job.occurrence`` ran
    (``fired_at`` None: its misfire policy skipped it), and the occurrences that will not fire.

    Success completes a one-shot and moves a repeating job to its next occurrence as its misfire
    policy says (by default one catch-up fire after downtime, then the first occurrence after
    now); an extra fire from ``trigger`` hands over to the regular occurrence it was put before.
    A failure is retried with backoff while attempts remain; then a one-shot fails and a
    repeating series continues.
    """
    outcome = _outcome(job, fired_at, error, now)
    check_transition(job.status, outcome[0].status)
    return outcome


def _outcome(
    job: ScheduledJob, fired_at: datetime | None, error: BaseException | None, now: datetime
) -> tuple[ScheduledJob, Missed]:
    last_fired_at = job.last_fired_at if fired_at is None else fired_at
    released = {"claimed_by": None, "claimed_until": None, "updated_at": now, "last_fired_at": last_fired_at}
    if error is not None and job.attempt < job.retry.attempts:
        retry_at = now + timedelta(milliseconds=job.retry.backoff.delay_after(job.attempt))
        return job.evolve(
            status=JobStatus.PENDING,
            attempt=job.attempt + 1,
            run_at=retry_at,
            last_error=_describe(error),
            **released,
        ), misfire.NONE
    last_error = None if error is None else _describe(error)
    skipped = misfire.Missed((job.scheduled_for,), 1) if fired_at is None else misfire.NONE
    # limit counts scheduled occurrences that fired: not skipped ones, not extra fires.
    counted = fired_at is not None and job.regular_due is None
    finished = job.occurrence_count + counted
    if job.repeat is None:
        status = JobStatus.COMPLETED if error is None else JobStatus.FAILED
        return job.evolve(
            status=status, occurrence_count=finished, last_error=last_error, **released
        ), skipped
    if job.regular_due is not None:
        following, missed = job.regular_due, misfire.NONE
    else:
        following, missed = misfire.following(job, now)
    ended = (job.limit is not None and finished >= job.limit) or (
        job.ends_at is not None and following > job.ends_at
    )
    if ended:
        return job.evolve(
            status=JobStatus.COMPLETED,
            occurrence_count=finished,
            last_error=last_error,
            regular_due=None,
            **released,
        ), skipped + missed
    return job.evolve(
        status=JobStatus.PENDING,
        occurrence=job.occurrence + 1,
        attempt=1,
        occurrence_count=finished,
        run_at=following,
        scheduled_for=following,
        regular_due=None,
        last_error=last_error if error is not None else job.last_error,
        **released,
    ), skipped + missed


def missed_event(job: ScheduledJob, missed: Missed, detected_at: datetime) -> ScheduleMissedEvent:
    return ScheduleMissedEvent(
        scheduled_job_id=job.id,
        topic=job.topic,
        user_payload=job.payload,
        metadata=job.metadata,
        timezone=job.timezone,
        policy=job.misfire.mode,
        missed=missed.named,
        count=missed.count,
        detected_at=detected_at,
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


# -- fire history ------------------------------------------------------------------


def fire_record(
    job: ScheduledJob,
    fired_at: datetime,
    ended: datetime,
    error: BaseException | None,
    *,
    fired: bool,
    heard: bool = True,
) -> FireRecord:
    """The history entry of attempt ``job.attempt`` of occurrence ``job.occurrence`` (as claimed):
    it ran from ``fired_at`` to ``ended`` (``fired`` False: the misfire policy skipped it;
    ``heard`` False: no listener heard it)."""
    if not fired:
        outcome = FireOutcome.SKIPPED
    elif not heard:
        outcome = FireOutcome.UNHEARD
    else:
        outcome = FireOutcome.SUCCEEDED if error is None else FireOutcome.FAILED
    return FireRecord(
        job_id=job.id,
        topic=job.topic,
        occurrence=job.occurrence,
        attempt=job.attempt,
        due_at=job.run_at,
        fired_at=fired_at,
        lateness_ms=(fired_at - job.run_at) // _MS,
        duration_ms=(ended - fired_at) // _MS if fired else 0,
        outcome=outcome,
        error=None if error is None else _describe(error),
        worker_id=job.claimed_by,
        traceback=None if error is None else traceback_of(error),
    )


_MS = timedelta(milliseconds=1)

# ---------------------------------------------------------------------------------------------


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:MAX_ERROR_LENGTH]


def traceback_of(error: BaseException) -> str | None:
    """The traceback a failed attempt's history entry keeps (capped by
    :func:`~schedule_sdk.domain.history.capped_traceback`): each listener's error of a
    :class:`ListenerFailed`, else ``error``'s own; None when there is none to show (an error
    that was never raised, e.g. :class:`UnheardFire`)."""
    errors = error.errors if isinstance(error, ListenerFailed) and error.errors else [error]
    raised = [e for e in errors if e.__traceback__ is not None]
    if not raised:
        return None
    text = "\n".join("".join(traceback.format_exception(e)) for e in raised)
    return capped_traceback(text)


class Firing(FirePath):
    """Runs claimed jobs' listeners and records their outcomes."""

    def __init__(
        self,
        *,
        store: JobStore,
        queue: ExecutionQueue,
        publisher: EventPublisher,
        clock: Clock,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        unheard_fails: bool = False,
    ) -> None:
        self._store = store
        #: Where fires are recorded: the store, when it keeps a fire history (else none is kept).
        self._history = store if isinstance(store, FireHistory) else None
        self._queue = queue
        self._publisher = publisher
        self._clock = clock
        self._metrics = metrics or NoMetrics()
        self._tracing = tracing or NoTracing()  # a span per fire, in the job's trace
        #: Called with every missed event before it is published (``event.count`` occurrences
        #: of ``event.topic`` did not fire; they are also counted as ``schedule.jobs.missed``).
        #: Must not block.
        self.on_missed: Callable[[ScheduleMissedEvent], None] = lambda event: None
        #: An unheard fire is a failed attempt (retried by the job's policy), not a success.
        self.unheard_fails = unheard_fails
        self._warned_topics: set[str] = set()  # unheard topics already logged by this fire path
        self._warned_lock = threading.Lock()

    def run(self, job: ScheduledJob) -> FireResult:
        """Emit the arrived event for a claimed job (unless its misfire policy skips it), then
        report the occurrences that will not fire; never raises for a listener's error."""
        fired_at = self._clock.now()
        start = misfire.at_start(job, fired_at)
        late = (fired_at - job.run_at).total_seconds()
        error: BaseException | None = None
        heard = True
        with self._tracing.fire(start.job, late) as span:
            started = time.perf_counter()
            if start.fire:
                error, heard = self._publish(start.job, fired_at)
                if not heard and self.unheard_fails:
                    error = UnheardFire(start.job.topic)
            duration = time.perf_counter() - started
            ended = self._clock.now()
            outcome, missed = settle(start.job, fired_at if start.fire else None, error, ended)
            kind = fire_outcome(start.job, outcome, error is not None) if start.fire else "skipped"
            span.finish(kind, error)
        if start.fire:
            self._count(start.job, outcome, error is not None, late, duration)
            if not heard:
                self._report_unheard(start.job)
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("fired job %s in %.1f ms", job.id, duration * 1000, extra=job_fields(job))
        missed = start.missed + missed
        if missed.count:
            self._report_missed(start.job, missed)
        record = fire_record(job, fired_at, ended, error, fired=start.fire, heard=heard)
        return FireResult(job, outcome, record)

    def _publish(self, job: ScheduledJob, fired_at: datetime) -> tuple[BaseException | None, bool]:
        """Emit the arrived event; the error that fails the attempt, if any, and whether a
        listener heard it (a publisher that cannot tell, or that failed, counts as heard)."""
        try:
            heard = self._publisher.publish(arrived_event(job, fired_at))
        except ListenerFailed as failed:
            return failed, True
        except Exception as unexpected:  # a publisher fault (e.g. a broker) also fails the attempt
            logger.exception("publishing job %s failed", job.id, extra=job_fields(job))
            return unexpected, True
        return None, heard is None or heard > 0

    def _report_unheard(self, job: ScheduledJob) -> None:
        """Count an unheard fire; log it once per topic for this fire path (a worker)."""
        self._metrics.increment("schedule.jobs.unheard", topic=job.topic)
        with self._warned_lock:
            first = job.topic not in self._warned_topics
            self._warned_topics.add(job.topic)
        if first:
            then = "its attempt failed" if self.unheard_fails else "the job moved on as after a success"
            logger.warning(
                "no listener heard topic %r (job %s): %s; check the worker's listener modules "
                "(logged once per topic, counted in schedule.jobs.unheard)",
                job.topic,
                job.id,
                then,
                extra=job_fields(job),
            )

    def _report_missed(self, job: ScheduledJob, missed: Missed) -> None:
        """Log, count (:attr:`on_missed`) and emit the ``schedule.missed`` event; a failing
        listener is logged, never retried, and does not fail the fire."""
        event = missed_event(job, missed, self._clock.now())
        logger.warning(
            "job %s missed %d occurrence(s) from %s (misfire policy %s)",
            job.id,
            missed.count,
            missed.named[0].isoformat(),
            job.misfire.mode,
            extra={
                "job_id": job.id,
                "occurrence": job.occurrence,
                "topic": job.topic,
                "missed": missed.count,
            },
        )
        self._metrics.increment("schedule.jobs.missed", missed.count, topic=job.topic)
        try:
            self.on_missed(event)
            self._publisher.publish_missed(event)
        except Exception:
            logger.exception("reporting missed fires of %s failed", job.id, extra=job_fields(job))

    def _count(
        self, job: ScheduledJob, outcome: ScheduledJob, failed: bool, late: float, took: float
    ) -> None:
        """Metrics of one fire: counters and two histogram samples, no I/O."""
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
        """Write outcomes and their fire history in one transaction, handing next occurrences and
        retries to the queue inside it (the write order); rows no longer claimed by the firing
        worker are left alone (their fires still go to the history: the listeners did run).

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
        with write_order(self._store, self._queue) as (tx, hand_off):
            tx.update_many(changes)
            if self._history is not None:
                self._history.record_fires(tx, [r.fire for r in results if r.fire is not None])
            hand_off.enqueue(following)
