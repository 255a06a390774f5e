"""The one fire path every substrate uses: run the listeners of a claimed job, then record the
outcome (completed, retry with backoff, failed, or the next occurrence of a repeating job).

A fire starts from a *claimed* row (status ``active``, claimed by this worker), so a cancelled,
paused or already-fired job can never fire; the outcome is written only if the row is still
claimed by this worker for the same occurrence, so a cancel or a pause that lands mid-fire wins.
The job's misfire policy (:mod:`schedule_sdk.domain.misfire`) decides whether a late occurrence fires;
occurrences that do not fire are reported as a ``schedule.missed`` event.

A repeating job with the overlap policy ``allow`` runs no listener when its occurrence is claimed:
the occurrence is handed to a *run* (a one-shot row of its own, ``ScheduledJob.run_of``), inserted
with the job's outcome in one transaction and handed to the queue like a next occurrence, so it
fires through this same path on any worker while the job moves on to its next occurrence. The
events and history entries of a run name the job it runs for.

A fire that no listener heard (the publisher reports 0 listeners) is recorded with the outcome
``unheard``, counted as ``schedule.jobs.unheard`` and logged once per topic by each fire path; the
job moves on as after a success, or, with ``unheard_fails``, the attempt fails and its retry
policy applies.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from schedule_sdk.core.claim_timing import claim_time, claimed_ahead, due_instant
from schedule_sdk.core.give_up import failed_event, failed_notice, log_give_up, log_retry, notice_event
from schedule_sdk.core.loop import fire_deadline
from schedule_sdk.core.overruns import Overruns
from schedule_sdk.core.rereads import Rereads
from schedule_sdk.core.unobserved import NoMetrics, NoTracing
from schedule_sdk.core.write_order import write_order
from schedule_sdk.domain import misfire
from schedule_sdk.domain.errors import (
    InvalidCalendar,
    ListenerFailed,
    ListenerTimedOut,
    UnheardFire,
)
from schedule_sdk.domain.events import MissedReason, ScheduleArrivedEvent, ScheduleMissedEvent
from schedule_sdk.domain.history import FireOutcome, FireRecord, capped_traceback
from schedule_sdk.domain.ids import new_id
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.misfire import Missed
from schedule_sdk.domain.status import JobStatus, check_transition
from schedule_sdk.domain.time_limits import NO_LIMITS, TimeLimits, limit_ms
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
    provided,
)

logger = logging.getLogger(__name__)

#: How often :meth:`Firing.hold` looks again for the store's clock while its offset is unknown (s).
_HOLD_STEP = 0.05

_ACTIVE = frozenset({JobStatus.ACTIVE})
MAX_ERROR_LENGTH = 2000


def arrived_event(job: ScheduledJob, fired_at: datetime) -> ScheduleArrivedEvent:
    """The arrived event of a fire of ``job`` (a run's names the job it runs for)."""
    return ScheduleArrivedEvent(
        scheduled_job_id=job.run_of or job.id,
        topic=job.topic,
        user_payload=job.payload,
        metadata=job.metadata,
        timezone=job.timezone,
        scheduled_for=job.scheduled_for,
        fired_at=fired_at,
        attempt=job.attempt,
        occurrence=job.occurrence,
    )


class Settled(NamedTuple):
    """What :func:`settle` decided."""

    #: The state to record.
    job: ScheduledJob
    #: The occurrences the misfire policy does not fire.
    missed: Missed
    #: The occurrences that came due while the fire ran and that the overlap policy does not
    #: fire (the first of them takes occurrence number ``job.occurrence + 1`` in the history).
    overlapped: Missed = misfire.NONE


def settle(
    job: ScheduledJob,
    fired_at: datetime | None,
    error: BaseException | None,
    now: datetime,
    *,
    excluded: bool = False,
) -> Settled:
    """The state to record after attempt ``job.attempt`` of occurrence ``job.occurrence`` ran
    (``fired_at`` None: its misfire policy skipped it), and the occurrences that will not fire.

    Success completes a one-shot and moves a repeating job to its next occurrence as its misfire
    policy says (by default one catch-up fire after downtime, then the first occurrence after
    now); an extra fire from ``trigger`` hands over to the regular occurrence it was put before.
    A job with an overlap policy judges by its misfire policy only what was due before the fire
    started; what came due while it ran is its overlap policy's
    (:func:`~schedule_sdk.domain.misfire.after_overlap`).
    A failure is retried with backoff while attempts remain and its retry policy retries that
    error (``retry_on`` / ``give_up_on``); else it gives up: a one-shot fails and a repeating
    series continues. The next occurrence is due at its nominal instant plus the job's
    spread offset and a fresh jitter (``scheduled_for`` stays nominal). An occurrence skipped
    because its date is ``excluded`` is not among the returned missed ones (the caller reports
    it with its own reason).
    """
    outcome = _outcome(job, fired_at, error, now, excluded)
    check_transition(job.status, outcome.job.status)
    return outcome


def _outcome(
    job: ScheduledJob, fired_at: datetime | None, error: BaseException | None, now: datetime, excluded: bool
) -> Settled:
    last_fired_at = job.last_fired_at if fired_at is None else fired_at
    released = {"claimed_by": None, "claimed_until": None, "updated_at": now, "last_fired_at": last_fired_at}
    if error is not None and job.attempt < job.retry.attempts and job.retry.retries(error):
        retry_at = now + timedelta(milliseconds=job.retry.backoff.delay_after(job.attempt))
        return Settled(
            job.evolve(
                status=JobStatus.PENDING,
                attempt=job.attempt + 1,
                run_at=retry_at,
                last_error=_describe(error),
                **released,
            ),
            misfire.NONE,
        )
    last_error = None if error is None else _describe(error)
    skipped = misfire.Missed((job.scheduled_for,), 1) if fired_at is None and not excluded else misfire.NONE
    # limit counts scheduled occurrences that fired: not skipped ones, not extra fires.
    counted = fired_at is not None and job.regular_due is None
    finished = job.occurrence_count + counted
    if job.repeat is None:
        status = JobStatus.COMPLETED if error is None else JobStatus.FAILED
        return Settled(
            job.evolve(status=status, occurrence_count=finished, last_error=last_error, **released), skipped
        )
    if job.regular_due is not None:
        candidate, missed = job.regular_due, misfire.NONE
    else:
        # With an overlap policy, the misfire policy judges what was due when the fire started.
        judged = now if job.overlap is None or fired_at is None else fired_at
        candidate, missed = misfire.following(job, judged)
    # A constant spread offset shifts the whole schedule: the fire's span is judged in nominal
    # time, and the instants found are shifted back.
    offset = job.spread_offset
    if fired_at is None:
        after = misfire.AfterOverlap(candidate, candidate)
    else:
        after = misfire.after_overlap(job, candidate, fired_at - offset, now - offset)
    following, overlapped = after.due, after.overlapped
    limited = job.limit is not None and finished >= job.limit
    if limited or (job.ends_at is not None and following > job.ends_at):
        return Settled(
            job.evolve(
                status=JobStatus.COMPLETED,
                occurrence_count=finished,
                last_error=last_error,
                regular_due=None,
                **released,
            ),
            skipped + missed,
            misfire.NONE if limited else overlapped,  # past its limit, nothing more was owed
        )
    return Settled(
        job.evolve(
            status=JobStatus.PENDING,
            occurrence=job.occurrence + 1 + (overlapped.count > 0),
            attempt=1,
            occurrence_count=finished,
            # its nominal instant plus the spread and a fresh jitter; a buffered occurrence no
            # earlier than the end of the fire it waited for
            run_at=max(after.run_at + offset, job.due_of(following)),
            scheduled_for=following,
            regular_due=None,
            last_error=last_error if error is not None else job.last_error,
            **released,
        ),
        skipped + missed,
        overlapped,
    )


def missed_event(
    job: ScheduledJob, missed: Missed, detected_at: datetime, reason: MissedReason = "misfire"
) -> ScheduleMissedEvent:
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
        reason=reason,
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
    timed_out: bool = False,
    excluded: bool = False,
) -> FireRecord:
    """The history entry of attempt ``job.attempt`` of occurrence ``job.occurrence`` (as claimed):
    it ran from ``fired_at`` to ``ended`` (``fired`` False: the misfire policy skipped it, or
    with ``excluded`` its calendar did: the entry's ``error`` says so; ``heard`` False: no
    listener heard it; ``timed_out``: it ran past its time limit). A run's entry is written
    under the job it runs for (``job.run_of``), with that job's occurrence number."""
    outcome = attempt_outcome(error, fired=fired, heard=heard, timed_out=timed_out)
    return FireRecord(
        job_id=job.run_of or job.id,
        topic=job.topic,
        occurrence=job.occurrence,
        attempt=job.attempt,
        due_at=job.run_at,
        fired_at=fired_at,
        lateness_ms=(fired_at - job.run_at) // _MS,
        duration_ms=(ended - fired_at) // _MS if fired else 0,
        outcome=outcome,
        error=EXCLUDED_NOTE if excluded else (None if error is None else _describe(error)),
        worker_id=job.claimed_by,
        traceback=None if error is None else traceback_of(error),
    )


def attempt_outcome(error: BaseException | None, *, fired: bool, heard: bool, timed_out: bool) -> FireOutcome:
    """How an attempt ended, as its history entry and the job's ``last_outcome`` say."""
    if not fired:
        return FireOutcome.SKIPPED
    if timed_out:
        return FireOutcome.TIMEOUT
    if not heard:
        return FireOutcome.UNHEARD
    return FireOutcome.SUCCEEDED if error is None else FireOutcome.FAILED


def overlap_record(job: ScheduledJob, overlapped: Missed, ended: datetime) -> FireRecord:
    """The history entry of the occurrences that came due while occurrence ``job.occurrence``
    (as claimed) ran until ``ended`` and that its overlap policy did not fire: one ``skipped``
    entry under the next occurrence number, due at the first of them, its ``error`` saying why
    (no listener ran; the job's next occurrence takes the number after it)."""
    first = overlapped.named[0]
    return FireRecord(
        job_id=job.id,
        topic=job.topic,
        occurrence=job.occurrence + 1,
        attempt=1,
        due_at=first,
        fired_at=ended,
        lateness_ms=(ended - first) // _MS,
        duration_ms=0,
        outcome=FireOutcome.SKIPPED,
        error=(
            f"overlap: {overlapped.count} occurrence(s) from {first.isoformat()} came due while "
            f"occurrence {job.occurrence} ran (overlap policy {job.overlap})"
        ),
        worker_id=job.claimed_by,
    )


_MS = timedelta(milliseconds=1)
#: The ``error`` of the history entry of an occurrence skipped because its date is excluded.
EXCLUDED_NOTE = "excluded: its date is excluded by the job's calendar"


def freed_slots(results: Sequence[FireResult]) -> dict[str, int]:
    """How many concurrency slots of each key recording ``results`` frees (one per claimed job
    with a key): the fires waiting for them are handed to the queue again, so they start as soon
    as the slot frees, in this process or another (the ``sql`` substrate's pollers are woken, the
    ``rq`` substrate's entries released)."""
    freed: dict[str, int] = {}
    for result in results:
        limit = result.claimed.concurrency
        if limit is not None:
            freed[limit.key] = freed.get(limit.key, 0) + 1
    return freed


def _claim_guard(result: FireResult) -> Guard:
    """The row of ``result`` is still claimed by the worker that fired it, for that occurrence."""
    claimed = result.claimed
    return Guard(_ACTIVE, claimed_by=claimed.claimed_by, occurrence=claimed.occurrence)


# ---------------------------------------------------------------------------------------------


def timed_out_error(error: BaseException | None) -> bool:
    """Whether ``error`` ended an attempt at its time limit (a :class:`ListenerTimedOut`, or a
    :class:`ListenerFailed` holding one)."""
    if isinstance(error, ListenerFailed):
        return any(isinstance(e, ListenerTimedOut) for e in error.errors)
    return isinstance(error, ListenerTimedOut)


@dataclass(frozen=True, slots=True)
class _Fired:
    """One fire, settled but not yet reported (metrics, log lines, the missed event)."""

    job: ScheduledJob
    start: misfire.Start
    fired_at: datetime
    ended: datetime
    error: BaseException | None
    heard: bool
    duration: float
    outcome: ScheduledJob
    missed: Missed
    #: The occurrences that came due while the fire ran and that its overlap policy does not fire.
    overlapped: Missed
    kind: str


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


class Held:
    """The reading of the store's clock a fire was held by (``reading``, taken at ``taken`` on
    the monotonic clock); None on a clock that does not move with real time."""

    __slots__ = ("_clock", "reading", "taken")

    def __init__(self, clock: Clock, reading: datetime | None, taken: float) -> None:
        self._clock = clock
        self.reading = reading
        self.taken = taken

    def now(self) -> datetime:
        """That reading plus the time elapsed since on the monotonic clock: an instant known to
        have passed on the store's clock (the clock's own ``now()`` without a reading)."""
        if self.reading is None:
            return self._clock.now()
        return self.reading + timedelta(seconds=time.monotonic() - self.taken)


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
        time_limits: TimeLimits = NO_LIMITS,
    ) -> None:
        self._store = store
        #: Where fires are recorded: the store, when it keeps a fire history (else none is kept).
        self._history = provided(store, FireHistory)
        self._queue = queue
        self._publisher = publisher
        self._clock = clock
        #: The reads of claimed-ahead jobs once due (the dispatcher tells it the jobs it holds).
        self.rereads = Rereads(store, clock)
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
        #: The limits of jobs without a ``time_limit`` of their own (per topic, and a default).
        self.time_limits = time_limits
        #: The helper threads of limited fires, and which of them are stuck past their limit.
        self.overruns = Overruns(self._metrics)
        self._helpers = itertools.count(1)

    def run(self, job: ScheduledJob) -> FireResult:
        """Emit the arrived event for a claimed job (unless its misfire policy or its calendar
        skips it), then report the occurrences that will not fire; never raises for a
        listener's error.

        A fire with a time limit (the job's own, else :attr:`time_limits`'s for its topic) runs
        on a helper thread (:class:`~schedule_sdk.core.overruns.Overruns`): at the limit its
        ``async def`` listeners are cancelled, and a sync listener still running is left behind
        (stuck); either way the attempt ends with the outcome ``timeout``.

        An occurrence of a job with the overlap policy ``allow`` that fires is handed to a run
        instead (:meth:`_hand_over`): no listener runs here.

        A job claimed ahead of its due instant (:data:`~schedule_sdk.core.claim_timing.CLAIM_AHEAD`) is held
        here until its ``run_at`` has passed on the store's clock (:meth:`hold`), and then its row
        is read again, in one statement with the other jobs handed over that are due by then
        (:class:`~schedule_sdk.core.rereads.Rereads`): if a cancel, a pause or a reschedule
        committed meanwhile, no listener runs (:meth:`_withdrawn`). A claim made
        once the job was due saw every such write committed before the due instant, so a job
        claimed so is not read again. The event's ``fired_at`` is the hold's reading of the
        store's clock plus the time elapsed since (:class:`Held`): never before ``run_at``."""
        held = self.hold(job)
        if claimed_ahead(job, self._clock) and not self.rereads.still_claimed(job, held.now):
            return self._withdrawn(job)
        fired_at = held.now()
        unreadable: InvalidCalendar | None = None
        try:
            start = misfire.at_start(job, fired_at)
        except InvalidCalendar as error:  # e.g. a holiday calendar without its package here
            logger.error("job %s: its calendar cannot be read: %s", job.id, error, extra=job_fields(job))
            start, unreadable = misfire.Start(job, True), error  # a failed attempt, not a silent fire
        if start.fire and unreadable is None and job.overlap == "allow" and job.repeat is not None:
            return self._hand_over(job, start, fired_at)
        limit = self.time_limits.resolve(job.time_limit, job.topic) if start.fire else None
        if limit is None or unreadable is not None:
            return self._report(self._fire(job, start, fired_at, None, unreadable))
        ms = limit_ms(limit)
        started = time.perf_counter()
        deadline = time.monotonic() + limit.total_seconds()
        done = self.overruns.run(
            lambda: self._fire(job, start, fired_at, (deadline, ms)),
            limit.total_seconds(),
            lambda: self._settled(
                job, start, fired_at, ListenerTimedOut(ms), True, time.perf_counter() - started
            ),
            f"schedule-sdk-limited-{next(self._helpers)}",
        )
        return self._report(done)

    def hold(self, job: ScheduledJob) -> Held:
        """Wait until ``job``'s due instant (its ``run_at``, and never before its
        ``scheduled_for``) has passed on the store's clock as claims read it
        (:func:`~schedule_sdk.core.claim_timing.claim_time`); at once for a due job, or on a clock that does
        not move with real time (nothing is claimed ahead on one). Returns the reading it waited
        on, which stamps the fire.

        The store's clock is read once and the rest waited out on the monotonic clock (so a step
        of this host's wall clock during the hold changes nothing). While the offset from the
        store's clock is unknown it looks again every ``_HOLD_STEP`` seconds."""
        if not self._clock.real_time:
            return Held(self._clock, None, 0.0)
        while (now := claim_time(self._clock)) is None:
            time.sleep(_HOLD_STEP)
        held = Held(self._clock, now, time.monotonic())
        due = due_instant(job)
        while (left := (due - held.now()).total_seconds()) > 0:
            time.sleep(left)
        return held

    def _withdrawn(self, job: ScheduledJob) -> FireResult:
        """A job claimed ahead whose row changed before it was due (cancelled, paused,
        rescheduled, released): no listener runs, nothing is counted or written."""
        self._metrics.increment("schedule.jobs.withdrawn", topic=job.topic)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("job %s changed before its due instant: not fired", job.id, extra=job_fields(job))
        return FireResult(job, job, withdrawn=True)

    def _hand_over(self, job: ScheduledJob, start: misfire.Start, fired_at: datetime) -> FireResult:
        """Hand the claimed occurrence of an ``allow`` job to a run (a one-shot row fired like any
        other, on any worker) and settle the job as after a fire that started and ended now: it
        moves on to its next occurrence at once, and the run is inserted by :meth:`record` with
        that outcome. No listener runs, no metric counts a fire and no history entry is written
        here: the run's fire is the occurrence's (its entries are under this job's id)."""
        run = start.job.run_for(new_id(), fired_at)
        ended = self._clock.now()
        outcome, missed, _ = settle(start.job, fired_at, None, ended)
        missed = start.missed + missed
        if missed.count:
            self._report_missed(start.job, missed)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("job %s handed occurrence to run %s", job.id, run.id, extra=job_fields(start.job))
        return FireResult(job, outcome, None, None, run)

    def _fire(
        self,
        job: ScheduledJob,
        start: misfire.Start,
        fired_at: datetime,
        deadline: tuple[float, int] | None,
        error: BaseException | None = None,
    ) -> _Fired:
        """Run the listeners (inside ``deadline``: a ``time.monotonic()`` instant and the limit
        in ms; none when ``error`` already failed the attempt) and settle the outcome; no
        metrics, no events (see :meth:`_report`)."""
        late = (fired_at - job.run_at).total_seconds()
        heard = True
        with self._tracing.fire(start.job, late) as span:
            started = time.perf_counter()
            if start.fire and error is None:
                if deadline is None:
                    error, heard = self._publish(start.job, fired_at)
                else:
                    with fire_deadline(*deadline):
                        error, heard = self._publish(start.job, fired_at)
                    if error is None and time.monotonic() > deadline[0]:
                        error = ListenerTimedOut(deadline[1])  # a sync listener returned late
                if not heard and self.unheard_fails and error is None and job.notice is None:
                    error = UnheardFire(start.job.topic)
            done = self._settled(job, start, fired_at, error, heard, time.perf_counter() - started)
            span.finish(done.kind, error)
        return done

    def _settled(
        self,
        job: ScheduledJob,
        start: misfire.Start,
        fired_at: datetime,
        error: BaseException | None,
        heard: bool,
        duration: float,
    ) -> _Fired:
        ended = self._clock.now()
        outcome, missed, overlapped = settle(
            start.job, fired_at if start.fire else None, error, ended, excluded=start.excluded
        )
        kind = fire_outcome(start.job, outcome, error is not None) if start.fire else "skipped"
        last = attempt_outcome(error, fired=start.fire, heard=heard, timed_out=timed_out_error(error))
        outcome = outcome.evolve(last_outcome=last)
        return _Fired(job, start, fired_at, ended, error, heard, duration, outcome, missed, overlapped, kind)

    def _report(self, done: _Fired) -> FireResult:
        """Count, log and emit what one fire led to (on the caller's thread, once per fire)."""
        job, start, error = done.job, done.start, done.error
        timed_out = timed_out_error(error)
        if start.fire:
            self._report_fired(done, timed_out)
        if start.excluded:
            self._report_missed(start.job, Missed((start.job.scheduled_for,), 1), "excluded")
        missed = start.missed + done.missed
        if missed.count:
            self._report_missed(start.job, missed)
        overlap: FireRecord | None = None
        if done.overlapped.count:
            self._report_missed(start.job, done.overlapped, "overlap")
            overlap = overlap_record(job, done.overlapped, done.ended)
        record = fire_record(
            job,
            done.fired_at,
            done.ended,
            error,
            fired=start.fire,
            heard=done.heard,
            timed_out=timed_out,
            excluded=start.excluded,
        )
        if job.notice is not None:  # its row keeps how it went (last_outcome, last_error)
            return FireResult(job, done.outcome, None, overlap)
        notice = None
        if start.fire and error is not None and done.kind == "failed":
            event = failed_event(start.job, done.fired_at, error, record.traceback, done.ended)
            notice = failed_notice(start.job, event, done.ended)
        return FireResult(job, done.outcome, record, overlap, notice)

    def _report_fired(self, done: _Fired, timed_out: bool) -> None:
        """Count and log a fire whose listeners ran (a notice's is not counted)."""
        job, start, error = done.job, done.start, done.error
        late = (done.fired_at - job.run_at).total_seconds()
        if job.notice is None:  # a notice's delivery is no fire of its topic
            self._count(start.job, done.outcome, error is not None, late, done.duration)
        if timed_out:
            self._metrics.increment("schedule.jobs.timed_out", topic=job.topic)
            logger.warning("job %s ran past its time limit (%s)", job.id, error, extra=job_fields(start.job))
        if not done.heard:
            self._report_unheard(start.job)
        if error is not None and done.kind == "retry":
            log_retry(start.job, done.outcome, error, done.ended, job_fields(start.job))
        elif error is not None:
            log_give_up(start.job, error, job_fields(start.job))
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("fired job %s in %.1f ms", job.id, done.duration * 1000, extra=job_fields(job))

    def _publish(self, job: ScheduledJob, fired_at: datetime) -> tuple[BaseException | None, bool]:
        """Emit the arrived event; the error that fails the attempt, if any, and whether a
        listener heard it (a publisher that cannot tell, or that failed, counts as heard)."""
        try:
            if job.notice is not None:  # a give-up's notice: its schedule.failed event
                self._publisher.publish_failed(notice_event(job))
                return None, True
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

    def _report_missed(self, job: ScheduledJob, missed: Missed, reason: MissedReason = "misfire") -> None:
        """Log, count (:attr:`on_missed`) and emit the ``schedule.missed`` event; a failing
        listener is logged, never retried, and does not fail the fire."""
        event = missed_event(job, missed, self._clock.now(), reason)
        logger.log(
            logging.INFO if reason == "excluded" else logging.WARNING,
            "job %s missed %d occurrence(s) from %s (%s)",
            job.id,
            missed.count,
            missed.named[0].isoformat(),
            "excluded by its calendar"
            if reason == "excluded"
            else (
                f"misfire policy {job.misfire.mode}"
                if reason == "misfire"
                else f"{reason} policy {job.overlap}"
            ),
            extra={
                "job_id": job.id,
                "occurrence": job.occurrence,
                "topic": job.topic,
                "missed": missed.count,
                "reason": reason,
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
        worker are left alone (their fires still go to the history: the listeners did run). A
        withdrawn result (no listener ran) writes nothing; its concurrency slot counts as freed.

        A result with a run (overlap ``allow``) inserts it and hands it to the queue in the same
        transaction, only if its job's outcome was written: an occurrence whose claim was lost
        (e.g. its worker was declared dead and another claimed it again) spawns no second run.

        :raises StoreUnavailable, QueueUnavailable: nothing was recorded; the fires will repeat
            once their claims expire (at-least-once).
        """
        freed = freed_slots(results)  # a withdrawn fire's slot is free too
        results = [r for r in results if not r.withdrawn]  # nothing ran: nothing to write
        if not results and not freed:
            return
        following = [Occurrence.of(r.outcome) for r in results if r.outcome.status is JobStatus.PENDING]
        changes = [(r.outcome, _claim_guard(r)) for r in results if r.run is None]
        spawning = [r for r in results if r.run is not None]
        with write_order(self._store, self._queue, outcomes=True) as (tx, hand_off):
            tx.update_many(changes)
            for result in spawning:  # a run only with its job's outcome, never twice per occurrence
                assert result.run is not None
                if tx.update(result.outcome, _claim_guard(result)):
                    tx.insert(result.run)
                    following.append(Occurrence.of(result.run))
            if self._history is not None:
                fires = [f for r in results for f in (r.fire, r.overlapped) if f is not None]
                self._history.record_fires(tx, fires)
            # The fires waiting for the freed slots go to a queue that holds entries again
            # (idempotent). Where the store is the queue (``sql``), the poller's own claim finds
            # them: this process's freed capacity wakes it when its last claim left rows waiting,
            # another process's freed slot through the store's watch.
            if freed and self._queue.holds_entries:
                handed = {o.job_id for o in following}
                # one more than freed: two fires of a key recorded at once by two workers each
                # hand over the earliest waiting one, the extra fills the other slot
                waiting = tx.waiting(sorted(freed), self._clock.now(), max(freed.values()) + 1)
                following += [o for o in waiting if o.job_id not in handed]
            hand_off.enqueue(following)
