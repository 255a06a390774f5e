"""``ScheduleService``: the API applications call."""

from __future__ import annotations

import base64
import binascii
import builtins
import copy
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from schedule_sdk.core import upcoming as ahead
from schedule_sdk.core.unobserved import NoMetrics, NoTracing
from schedule_sdk.core.write_order import joined_write_order, write_order
from schedule_sdk.domain import timing
from schedule_sdk.domain.errors import (
    ClientRequestIdInUse,
    InvalidCursor,
    InvalidPayload,
    InvalidTopic,
    JobFinished,
    JobNotFound,
    JobOwnedByTimer,
    NotRequeueable,
    NotReschedulable,
    NotTriggerable,
    ScheduleError,
    TransactionNotJoinable,
)
from schedule_sdk.domain.history import FireOutcome, FireRecord, parse_outcome
from schedule_sdk.domain.ids import ID_PATTERN, new_id
from schedule_sdk.domain.jobs import (
    MAX_TOPIC_LENGTH,
    JobPage,
    JobQuery,
    JobSpec,
    OneShotSpec,
    RepeatSpec,
    ScheduledJob,
    bounded_fires,
    check_metadata_text,
    encode_json,
    repeated_request_id,
    request_key,
    spec_fire,
)
from schedule_sdk.domain.status import FINISHED_STATUSES, OPEN_STATUSES, JobStatus, parse_status
from schedule_sdk.domain.text import holds_storable_text, shown, storable
from schedule_sdk.domain.timers import TIMER_TOPIC
from schedule_sdk.domain.timing import FireTime
from schedule_sdk.domain.upcoming import UpcomingFire, UpcomingGroups, UpcomingPage
from schedule_sdk.ports import (
    Clock,
    ExecutionQueue,
    FireHistory,
    Guard,
    JobStore,
    JobTransaction,
    JoinableStore,
    Metrics,
    Occurrence,
    Tracing,
    provided,
)

logger = logging.getLogger(__name__)

_MICROSECOND = timedelta(microseconds=1)

MAX_PAGE_SIZE = 500
#: The longest text a job id can be: a lookup by a longer id (or one holding a NUL or a lone
#: surrogate) names no job, and is answered without asking the store.
MAX_JOB_ID_LENGTH = 255


def names_no_job(job_id: object) -> bool:
    """Whether ``job_id`` cannot be the id of any job (not a string, longer than
    :data:`MAX_JOB_ID_LENGTH`, or holding text no store can hold): a lookup of it finds nothing."""
    return not isinstance(job_id, str) or len(job_id) > MAX_JOB_ID_LENGTH or not holds_storable_text(job_id)


class ScheduleService:
    """Schedule, cancel, reschedule and query jobs.

    Every write follows the write order (:mod:`schedule_sdk.core.write_order`): one store transaction
    writes the row and, inside it, hands the occurrence to the execution queue; a queue error
    rolls the row back, and a failed commit is followed by withdrawing the queue entry. Invalid input raises a
    :class:`~schedule_sdk.ScheduleValidationError` subclass before anything is written.

    The writes also take ``connection=``: the caller's SQLAlchemy ``Connection`` or ``Session`` on
    the database that holds the SDK's tables. The row is then written in the caller's open
    transaction and the hand-off to the execution queue happens after the caller commits; if the
    caller rolls back, the job never existed. If such a call raises, roll the transaction back.
    """

    def __init__(
        self,
        *,
        store: JobStore,
        queue: ExecutionQueue,
        clock: Clock,
        max_payload_bytes: int = 65_536,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._max_payload_bytes = max_payload_bytes
        self._metrics = metrics or NoMetrics()  # schedule.jobs.scheduled / .cancelled
        self._tracing = tracing or NoTracing()  # the caller's trace, stored with the job

    def with_store(self, store: JobStore) -> ScheduleService:
        """This service (same queue, clock, limits, metrics and tracing) writing to ``store``."""
        twin = copy.copy(self)
        twin._store = store
        return twin

    def _joinable(self) -> JoinableStore:
        """The store, which must be a :class:`JoinableStore` for ``connection=``.

        :raises TransactionNotJoinable: it cannot join a caller's transaction.
        """
        joinable = provided(self._store, JoinableStore)
        if joinable is None:
            raise TransactionNotJoinable(f"{type(self._store).__name__} cannot join a caller's transaction")
        return joinable

    def schedule_at(self, spec: OneShotSpec, *, connection: object | None = None) -> ScheduledJob:
        """Schedule a one-shot job to fire once at ``spec.run_at`` (in ``connection``'s transaction if given).

        :raises RunAtInPast: ``run_at`` is before now.
        :raises ClientRequestIdInUse: ``spec.metadata.client_request_id`` is already used.
        :raises StoreUnavailable, QueueUnavailable: nothing was written.
        :raises TransactionNotJoinable: ``connection`` is not on the database of the job tables.
        """
        if not isinstance(spec, OneShotSpec):
            raise TypeError("schedule_at takes a OneShotSpec")
        job = self._new_job(spec)
        self._write(job, connection=connection)
        return job

    def schedule_repeat(self, spec: RepeatSpec, *, connection: object | None = None) -> ScheduledJob:
        """Schedule a cron or interval job; its first occurrence is the first one after now."""
        if not isinstance(spec, RepeatSpec):
            raise TypeError("schedule_repeat takes a RepeatSpec")
        job = self._new_job(spec)
        self._write(job, connection=connection)
        return job

    def schedule_many(self, specs: Sequence[JobSpec]) -> builtins.list[ScheduledJob]:
        """Schedule many jobs (one-shot and repeating specs, mixed) in one call, all or nothing.

        Every spec is validated before anything is written. The jobs are then written in the
        write order as one transaction (one bulk insert) and one hand-off of all their
        occurrences to the execution queue. Returns the jobs in the order of ``specs``.

        :raises ScheduleValidationError: a spec is invalid (as ``schedule_at`` or
            ``schedule_repeat`` would refuse it); the error's ``index`` is its position in
            ``specs``. Nothing was written.
        :raises ClientRequestIdInUse: a spec's ``client_request_id`` is already used, or used
            by an earlier spec of the call (``index`` names the spec). Nothing was written.
        :raises TypeError: an item of ``specs`` is not a ``OneShotSpec`` or ``RepeatSpec``.
        :raises StoreUnavailable, QueueUnavailable: nothing was written.
        """
        jobs = self._new_jobs(specs)
        if not jobs:
            return []
        with write_order(self._store, self._queue) as (tx, hand_off):
            try:
                tx.insert_many(jobs)
            except ClientRequestIdInUse as error:
                used = (error.tenant_id, error.client_request_id)
                index = next((i for i, j in enumerate(jobs) if request_key(j.metadata) == used), None)
                raise _refused_at(index, error) from error.__cause__
            hand_off.enqueue([Occurrence.of(job) for job in jobs])
        return jobs

    def cancel(self, job_id: str, *, connection: object | None = None) -> None:
        """Cancel a job. Idempotent: no error if it is already cancelled, completed or failed.

        A cancel that returned before an occurrence's due instant (by the store's clock) means no
        listener runs for that occurrence, even if a worker already claimed it ahead of that
        instant: the fire path reads the row again once the occurrence is due. A fire already
        under way when the cancel commits (after the due instant) finishes its listeners, but its
        outcome is discarded: the job stays cancelled.

        :raises JobNotFound: no job has this id.
        :raises JobOwnedByTimer: the job fires a timer (it is steered by the timer only).
        """
        if names_no_job(job_id):
            raise JobNotFound(str(job_id)[:80])
        now = self._clock.now()
        if connection is not None:
            with joined_write_order(self._joinable(), self._queue, connection, []) as (joined, after):
                open_job = cancel_row(joined, job_id, now)
                if open_job is not None:
                    after.withdraw([Occurrence.of(open_job)])
            return
        with self._store.transaction() as tx:
            job = cancel_row(tx, job_id, now)
            if job is None:
                return
        self._queue.withdraw([Occurrence.of(job)])
        self._metrics.increment("schedule.jobs.cancelled", topic=job.topic)

    def reschedule(self, job_id: str, spec: JobSpec, *, connection: object | None = None) -> ScheduledJob:
        """Replace a pending or active job: in one transaction the old job is cancelled and a new
        one (with a new id, linked both ways) is created from ``spec``. The old job's cancel
        holds as :meth:`cancel`'s: if it returned before an occurrence's due instant, no listener
        runs for that occurrence of the old job.

        :raises JobNotFound: no job has this id.
        :raises NotReschedulable: the job is completed, failed or cancelled.
        :raises JobOwnedByTimer: the job fires a timer (it is steered by the timer only).
        """
        if names_no_job(job_id):
            raise JobNotFound(str(job_id)[:80])
        new = self._new_job(spec)
        old = self._write(new, replace=job_id, connection=connection)
        assert old is not None
        if connection is None:  # in the caller's transaction, this happens after its commit
            self._queue.withdraw([Occurrence.of(old)])
        return new.evolve(rescheduled_from=job_id)

    # -- steering: pause, resume, trigger ------------------------------------------------------

    def pause(self, job_id: str) -> ScheduledJob:
        """Hold a job (status ``paused``): it never fires until :meth:`resume`. Idempotent. As
        for :meth:`cancel`, a pause that returned before an occurrence's due instant means no
        listener runs for it until the job is resumed.

        A fire already in flight finishes running its listeners, but its outcome is not recorded
        (the pause wins, as a cancel does): the job stays paused at that occurrence, which fires
        again after ``resume`` with the same ``dedup_key`` (at least once).

        :raises JobNotFound: no job has this id.
        :raises JobFinished: the job is completed, cancelled or failed (nothing is written).
        """
        return self._steer(job_id, paused, hand_over=False)

    def resume(self, job_id: str) -> ScheduledJob:
        """Let a paused job fire again. Idempotent (a pending or active job is left as it is).

        The job's next fire is the one it was paused at: if that is overdue, the job's misfire
        policy decides (``fire_once``: one catch-up fire for everything missed; ``skip``: the
        missed occurrences do not fire; ``fire_all``: they fire in turn, up to its cap), and
        what does not fire is reported in a ``schedule.missed`` event.

        :raises JobNotFound: no job has this id.
        :raises JobFinished: the job is completed, cancelled or failed (nothing is written).
        """
        return self._steer(job_id, resumed, hand_over=True)

    def trigger(self, job_id: str) -> ScheduledJob:
        """Fire a pending job now, as one extra fire with its own ``schedule.arrived`` event.

        A one-shot fires now instead of at its ``run_at`` (and then completes). A repeating job's
        extra fire takes the occurrence number of its next regular occurrence, which follows it
        with the next number at its unchanged due instant: every fire keeps a distinct, stable
        ``dedup_key`` and the schedule (``limit`` too) is unchanged. The event's
        ``scheduled_for`` is the instant of the trigger.

        :raises JobNotFound: no job has this id.
        :raises JobFinished: the job is completed, cancelled or failed.
        :raises NotTriggerable: the job is paused, a fire is in flight, a retry is pending, or
            its next fire is already due (nothing is written).
        """
        return self._steer(job_id, triggered, hand_over=True)

    def requeue(self, job_id: str) -> ScheduledJob:
        """Run a finished job again (what an operator does after fixing a failure): a failed,
        completed or cancelled one-shot fires now, as a new occurrence (the next number, attempt
        1, so a new ``dedup_key``), and then completes or fails as any fire does; a failed
        repeating job resumes its schedule at its first occurrence after now. The job keeps its
        id, payload, retry and misfire policies, and its fire history (earlier occurrences stay
        listed by :meth:`history`).

        :raises JobNotFound: no job has this id.
        :raises NotRequeueable: the job is not finished (pending, active or paused), it is a
            completed or cancelled repeating job, its schedule has ended, or it was cancelled by
            ``reschedule`` (its replacement runs instead). Nothing is written.
        """
        job = self._steer(job_id, requeued, hand_over=True)
        self._metrics.increment("schedule.jobs.requeued", topic=job.topic)
        return job

    def get_by_id(self, job_id: str) -> ScheduledJob | None:
        """The job, or None if no job has this id."""
        if names_no_job(job_id):
            return None
        return self._store.get(job_id)

    def preview(self, spec_or_job_id: JobSpec | str, n: int = 5) -> list[FireTime]:
        """The next ``n`` (1 to 1000) fire times, in order, of a spec (as if it were scheduled
        now: the first is the ``run_at`` that ``schedule_at`` / ``schedule_repeat`` would store)
        or of a stored job (from its ``run_at``; for a job waiting to retry, the retry comes first).
        The list stops at the spec's or the job's ``limit`` and ``ends_at``; it is empty for a
        completed, failed or cancelled job. Each :class:`~schedule_sdk.FireTime` has the UTC
        instant, the local time in the cron's (else the job's) zone and a DST ``mark``.

        A spread fire is shown at the instant it fires, with its ``nominal`` occurrence: a stored
        job's offset is known; a spec's only when it names a ``spread_key`` (else the offset comes
        from the id the job will get, and its fires are shown at their nominal instants). Jitter
        is not previewable: only the current occurrence of a stored job shows the jitter drawn for
        it. An occurrence on a date the calendar excludes is listed, marked ``excluded``.

        :raises JobNotFound: no job has this id.
        """
        timing.check_count(n)
        if isinstance(spec_or_job_id, str):
            job = self.get_by_id(spec_or_job_id)
            if job is None:
                raise JobNotFound(spec_or_job_id[:80])
            return _job_fire_times(job, n)
        if isinstance(spec_or_job_id, OneShotSpec):
            spec_at = spec_or_job_id
            return [spec_fire(ahead.fire_at(spec_at.run_at, spec_at.timezone), spec_at)]
        if not isinstance(spec_or_job_id, RepeatSpec):
            raise TypeError("preview takes a OneShotSpec, a RepeatSpec or a job id")
        return spec_or_job_id.next_fire_times(self._clock.now(), n)

    def list(
        self,
        *,
        owner_id: str | None = None,
        tenant_id: str | None = None,
        topic: str | None = None,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
        limit: int = 20,
        cursor: str | None = None,
        outcome: FireOutcome | str | Iterable[FireOutcome | str] | None = None,
    ) -> JobPage:
        """A page of jobs matching every given filter, in creation order (keyset pagination:
        pass the returned ``next_cursor`` to get the next page; None means this is the last).
        ``outcome`` keeps the jobs whose last attempt ended so (``ScheduledJob.last_outcome``:
        e.g. ``"unheard"``, a fire no listener heard, whatever the job's status now).

        :raises InvalidStatus: ``status`` names no job status, or ``outcome`` no fire outcome.
        :raises InvalidCursor: the cursor is malformed or ``limit`` is out of range.
        :raises InvalidMetadata, InvalidTopic: a filter is not text a job could hold (empty, too
            long, or holding a NUL or a lone surrogate).
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE_SIZE:
            raise InvalidCursor(f"limit must be an int between 1 and {MAX_PAGE_SIZE}")
        _check_filters(owner_id=owner_id, tenant_id=tenant_id, topic=topic)
        query = JobQuery(
            owner_id=owner_id,
            tenant_id=tenant_id,
            topic=topic,
            statuses=_statuses(status),
            outcomes=_outcomes(outcome),
            limit=limit + 1,
            after_id=_decode_cursor(cursor),
        )
        rows = self._store.list_jobs(query)
        items = rows[:limit]
        more = len(rows) > limit
        return JobPage(items=items, next_cursor=_encode_cursor(items[-1].id) if more else None)

    def history(
        self, job_id: str, *, limit: int = 50, before: datetime | None = None
    ) -> builtins.list[FireRecord]:
        """What happened to a job: up to ``limit`` (1-500) of its fires, newest first, each with
        its occurrence, attempt, due and fire instants, lateness, duration, outcome, error and
        worker. Pass the last entry's ``fired_at`` as ``before`` for the next page. Entries are
        kept until retention purges them, even after the job itself is gone. A job that replaced
        another (a reschedule, a changed declared schedule: ``rescheduled_from`` /
        ``rescheduled_to``) shares its history with the jobs of that chain still stored
        (:func:`lineage`): one schedule, all its fires, each entry naming its own row. An unknown id has
        none (an empty list, not an error), and so has every job of a store that keeps no fire
        history (one that is no :class:`~schedule_sdk.ports.FireHistory`).

        :raises InvalidCursor: ``limit`` is out of range or ``before`` is naive.
        """
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE_SIZE:
            raise InvalidCursor(f"limit must be an int between 1 and {MAX_PAGE_SIZE}")
        if before is not None:
            if not isinstance(before, datetime) or before.utcoffset() is None:
                raise InvalidCursor("before must be an aware datetime")
            before = timing.bounded_utc(before, "before", InvalidCursor)
        history = provided(self._store, FireHistory)
        if history is None or names_no_job(job_id):
            return []
        ids = lineage(self._store, job_id)
        if len(ids) == 1:
            return history.history(job_id, limit, before)
        merged = [f for one in ids for f in history.history(one, limit, before)]
        merged.sort(key=lambda f: f.fired_at, reverse=True)
        return merged[:limit]

    def upcoming(
        self,
        window: timedelta,
        *,
        limit: int = 100,
        topic: str | None = None,
        tenant: str | None = None,
        owner: str | None = None,
    ) -> builtins.list[UpcomingFire]:
        """Every fire of every open job (pending, active, paused; of ``topic``, ``tenant`` and
        ``owner`` if given) from now until now + ``window``, in time order, at most ``limit``
        (1-1000): crons and intervals expanded, with their DST marks; a paused job's fires are
        included, marked ``paused`` (they happen only if it is resumed). The first page of
        :meth:`upcoming_page`, which says whether the window holds more and pages on. Reads every
        open job of the filter: on a large store, narrow it with ``topic``, ``tenant`` or ``owner``.

        :raises InvalidCursor: ``window`` is not a positive timedelta or ``limit`` is out of range.
        :raises InvalidMetadata, InvalidTopic: a filter is not text a job could hold.
        """
        return self.upcoming_page(window, limit=limit, topic=topic, tenant=tenant, owner=owner).items

    def upcoming_page(
        self,
        window: timedelta,
        *,
        limit: int = 100,
        cursor: str | None = None,
        topic: str | None = None,
        tenant: str | None = None,
        owner: str | None = None,
    ) -> UpcomingPage:
        """One page of :meth:`upcoming`: at most ``limit`` (1-1000) fires after ``cursor`` (the
        previous page's ``next_cursor``; None: from now), with ``total`` (the fires the window
        holds from the page's start on: counted, not listed), ``truncated`` (more follow) and
        ``next_cursor``. The window's end is fixed by the read, so each page's window ends a little
        later than the one before.

        :raises InvalidCursor: ``window`` is not a positive timedelta, ``limit`` is out of range or
            ``cursor`` is no cursor of this read.
        :raises InvalidMetadata, InvalidTopic: a filter is not text a job could hold.
        """
        end = self._upcoming_end(window, limit, "limit", topic=topic, tenant=tenant, owner=owner)
        jobs = ahead.open_jobs(self._store, MAX_PAGE_SIZE, topic=topic, tenant=tenant, owner=owner)
        return ahead.page_of(jobs, end, limit, cursor)

    def upcoming_by_job(
        self,
        window: timedelta,
        *,
        per_job: int = 3,
        limit: int = MAX_PAGE_SIZE,
        topic: str | None = None,
        tenant: str | None = None,
        owner: str | None = None,
    ) -> UpcomingGroups:
        """The fires of :meth:`upcoming` grouped by job: each open job with a fire in the window,
        its first ``per_job`` (1-1000) fires and how many it has in the window (counted, not
        listed: arithmetic for an interval), ordered by its first fire; at most ``limit``
        (1-1000) jobs, ``truncated`` when more have fires, with the totals of them all.

        :raises InvalidCursor: ``window`` is not a positive timedelta, or ``per_job`` or
            ``limit`` is out of range.
        :raises InvalidMetadata, InvalidTopic: a filter is not text a job could hold.
        """
        end = self._upcoming_end(window, limit, "limit", topic=topic, tenant=tenant, owner=owner)
        _check_upcoming_count(per_job, "per_job")
        jobs = ahead.open_jobs(self._store, MAX_PAGE_SIZE, topic=topic, tenant=tenant, owner=owner)
        return ahead.groups_of(jobs, end, per_job, limit)

    def _upcoming_end(
        self, window: object, limit: object, name: str, *, topic: object, tenant: object, owner: object
    ) -> datetime:
        if not isinstance(window, timedelta) or window <= timedelta(0):
            raise InvalidCursor("window must be a positive timedelta")
        _check_upcoming_count(limit, name)
        _check_filters(owner_id=owner, tenant_id=tenant, topic=topic)
        now = self._clock.now()
        return timing.MAX_INSTANT if window >= timing.MAX_INSTANT - now else now + window

    # -- internals ---------------------------------------------------------------------------

    def _new_job(self, spec: JobSpec) -> ScheduledJob:
        if spec.topic == TIMER_TOPIC:
            raise InvalidTopic(f"the topic {TIMER_TOPIC!r} is the timer's own: schedule a timer instead")
        now = self._clock.now()
        if spec.payload is not None and len(encode_json(spec.payload).encode()) > self._max_payload_bytes:
            raise InvalidPayload(f"payload is larger than {self._max_payload_bytes} bytes")
        return ScheduledJob.first_of(spec, new_id(), now, trace_context=self._tracing.capture())

    def _new_jobs(self, specs: Sequence[JobSpec]) -> builtins.list[ScheduledJob]:
        """``_new_job`` for each spec, then refuse a ``client_request_id`` used twice in ``specs``
        (a refusal names the spec's index)."""
        jobs: builtins.list[ScheduledJob] = []
        for index, spec in enumerate(specs):
            if not isinstance(spec, OneShotSpec | RepeatSpec):
                raise TypeError(f"specs[{index}] is not a OneShotSpec or RepeatSpec")
            try:
                jobs.append(self._new_job(spec))
            except ScheduleError as error:
                raise _refused_at(index, error) from error.__cause__
        repeated = repeated_request_id(jobs)
        if repeated is not None:
            (tenant, request_id), index = repeated
            raise _refused_at(index, ClientRequestIdInUse(request_id, tenant))
        return jobs

    def _write(
        self, job: ScheduledJob, replace: str | None = None, connection: object | None = None
    ) -> ScheduledJob | None:
        """Insert ``job`` (cancelling job ``replace`` in the same transaction) in the write order;
        return the replaced job as it was before."""
        if connection is not None:
            return self._write_joined(job, replace, connection)
        replaced: ScheduledJob | None = None
        with write_order(self._store, self._queue) as (tx, hand_off):
            if replace is not None:
                replaced = cancel_row(tx, replace, job.created_at, replaced_by=job.id)
                job = job.evolve(rescheduled_from=replace)
            tx.insert(job)
            hand_off.enqueue([Occurrence.of(job)])
        self._metrics.increment("schedule.jobs.scheduled", topic=job.topic)
        return replaced

    def _steer(
        self,
        job_id: str,
        change: Callable[[ScheduledJob, datetime], ScheduledJob | None],
        *,
        hand_over: bool,
    ) -> ScheduledJob:
        """Apply ``change`` to the locked row in one transaction (None: nothing to write), in the
        write order: with ``hand_over`` the changed occurrence is enqueued inside the transaction
        (withdrawn if the commit fails); without, the old one is withdrawn after the commit."""
        if names_no_job(job_id):
            raise JobNotFound(str(job_id)[:80])
        now = self._clock.now()
        with write_order(self._store, self._queue) as (tx, hand_off):
            job = tx.get(job_id, for_update=True)
            if job is None:
                raise JobNotFound(job_id)
            if job.topic == TIMER_TOPIC:  # finished ones too: a requeue would fire it again
                raise JobOwnedByTimer(job_id, change.__name__)
            changed = change(job, now)
            if changed is None:
                return job
            tx.update(changed, Guard(frozenset({job.status})))
            if hand_over:
                hand_off.enqueue([Occurrence.of(changed)])
        if not hand_over:
            self._queue.withdraw([Occurrence.of(job)])
        return changed

    # -- in the caller's transaction (connection=) -----------------------------------------------

    def _write_joined(
        self, job: ScheduledJob, replace: str | None, connection: object
    ) -> ScheduledJob | None:
        """``_write`` in the caller's transaction, in the joined write order."""
        replaced: ScheduledJob | None = None
        occurrence = [Occurrence.of(job)]
        with joined_write_order(self._joinable(), self._queue, connection, occurrence) as (joined, after):
            if replace is not None:
                replaced = cancel_row(joined, replace, job.created_at, replaced_by=job.id)
                job = job.evolve(rescheduled_from=replace)
            joined.insert(job)
            if replaced is not None:
                after.withdraw([Occurrence.of(replaced)])
        return replaced

    # -- end of the caller's-transaction section ------------------------------------------------


# -- the one cancel path: ``cancel`` and the cancel half of ``reschedule`` ---------------------


#: The most rows :func:`lineage` follows each way (a guard against a cycle written by hand).
MAX_LINEAGE = 256


def lineage(store: JobStore, job_id: str) -> list[str]:
    """The ids of the one schedule ``job_id`` is a row of: the jobs it replaced
    (``rescheduled_from``, back to the first still stored), itself, and the jobs that replaced it
    (``rescheduled_to``), oldest first; ``[job_id]`` for a job never replaced or unknown."""
    ids = [job_id]
    seen = {job_id}
    job = store.get(job_id)
    if job is None:
        return ids
    for step in ("rescheduled_from", "rescheduled_to"):
        link: ScheduledJob | None = job
        while link is not None and len(seen) < 2 * MAX_LINEAGE:
            nxt = getattr(link, step)
            if nxt is None or nxt in seen:
                break
            seen.add(nxt)
            if step == "rescheduled_from":
                ids.insert(0, nxt)
            else:
                ids.append(nxt)
            link = store.get(nxt)
    return ids


def shown_history(service: ScheduleService, job: ScheduledJob, limit: int) -> list[FireRecord]:
    """The fires an operator sees with ``job`` (newest first, at most ``limit``): its history;
    for a run (``run_of``), whose fires are written under the job it runs for, that job's entries
    of the run's occurrence (looked for among its latest :data:`MAX_PAGE_SIZE`)."""
    if job.run_of is None:
        return service.history(job.id, limit=limit)
    fires = service.history(job.run_of, limit=MAX_PAGE_SIZE)
    return [f for f in fires if f.occurrence == job.occurrence][:limit]


def cancel_row(
    tx: JobTransaction, job_id: str, now: datetime, *, replaced_by: str | None = None
) -> ScheduledJob | None:
    """Cancel job ``job_id`` inside ``tx`` (its row locked, its claim dropped); return the row as
    it was before, for the caller to withdraw its queue entry after the commit.

    A finished job is left alone: None for a cancel (idempotent); with ``replaced_by`` (the id of
    the job replacing it, linked from the cancelled row) it is refused instead.

    :raises JobNotFound: no job has this id.
    :raises NotReschedulable: ``replaced_by`` is given and the job is finished (or changed meanwhile).
    """
    job = tx.get(job_id, for_update=True)
    if job is None:
        raise JobNotFound(job_id)
    if job.status not in OPEN_STATUSES:
        if replaced_by is None:
            return None
        raise NotReschedulable(job_id, job.status.value)
    if job.topic == TIMER_TOPIC:
        raise JobOwnedByTimer(job_id, "rescheduled" if replaced_by else "cancelled")
    cancelled = job.moved(JobStatus.CANCELLED, now, claimed_by=None, claimed_until=None)
    if replaced_by is not None:
        cancelled = cancelled.evolve(rescheduled_to=replaced_by)
    if not tx.update(cancelled, Guard(OPEN_STATUSES)) and replaced_by is not None:
        raise NotReschedulable(job_id, "changing")
    return job


# -- steering decisions (pure: the locked row and now -> the row to write, or None for nothing;
# they raise the typed refusals). An async service applies the same ones.


def paused(job: ScheduledJob, now: datetime) -> ScheduledJob | None:
    """``pause``: the row paused (its claim dropped, so an in-flight outcome is not recorded)."""
    if job.status is JobStatus.PAUSED:
        return None
    _refuse_finished(job)
    return job.moved(JobStatus.PAUSED, now, claimed_by=None, claimed_until=None)


def resumed(job: ScheduledJob, now: datetime) -> ScheduledJob | None:
    """``resume``: a paused row pending again, at the fire it was paused at."""
    if job.status is not JobStatus.PAUSED:
        _refuse_finished(job)
        return None
    return job.moved(JobStatus.PENDING, now)


def triggered(job: ScheduledJob, now: datetime) -> ScheduledJob | None:
    """``trigger``: the row due now, with the regular due instant kept in ``regular_due``."""
    _refuse_finished(job)
    reason = {
        JobStatus.PAUSED: "it is paused (resume it first)",
        JobStatus.ACTIVE: "a fire is in flight",
    }.get(job.status)
    if reason is None and job.attempt > 1:
        reason = "a retry is pending"
    if reason is None and job.run_at <= now:
        reason = "its next fire is already due"
    if reason is not None:
        raise NotTriggerable(job.id, reason)
    regular_due = job.scheduled_for if job.is_repeating else None
    return job.evolve(run_at=now, scheduled_for=now, regular_due=regular_due, updated_at=now)


def requeued(job: ScheduledJob, now: datetime) -> ScheduledJob:
    """``requeue``: a finished one-shot due now as a new occurrence, or a failed repeating job at
    its first occurrence after now."""
    if job.status not in FINISHED_STATUSES:
        raise NotRequeueable(job.id, f"it is {job.status.value}; only a finished job is requeued")
    if job.rescheduled_to is not None:
        raise NotRequeueable(job.id, f"it was replaced by job {shown(job.rescheduled_to)} (reschedule)")
    if not job.is_repeating:
        return job.requeued(now, now)
    if job.status is not JobStatus.FAILED:
        raise NotRequeueable(job.id, f"a {job.status.value} repeating job has ended; schedule it anew")
    following = job.next_occurrence_after(now)
    ended = job.ends_at is not None and following > job.ends_at
    if ended or (job.limit is not None and job.occurrence_count >= job.limit):
        raise NotRequeueable(job.id, "its schedule has ended (limit or ends_at)")
    return job.requeued(following, now).evolve(run_at=job.due_of(following))


def _refuse_finished(job: ScheduledJob) -> None:
    if job.status in FINISHED_STATUSES:
        raise JobFinished(job.id, job.status.value)


def _refused_at(index: int | None, error: ScheduleError) -> ScheduleError:
    """``error`` naming the position of the refused spec of a ``schedule_many`` call."""
    if index is not None:
        error.index = index
        error.args = (f"specs[{index}]: {error.message}", *error.args[1:])
    return error


def _check_filters(*, owner_id: object = None, tenant_id: object = None, topic: object = None) -> None:
    """The text filters of a read: what a job could hold (the metadata rule for the owner and
    tenant; a topic filter of at most 200 storable characters, its pattern not required: a text
    that is no topic matches nothing)."""
    for name, value in (("owner_id", owner_id), ("tenant_id", tenant_id)):
        if value is not None:
            check_metadata_text(value, name)
    if topic is None:
        return
    if not isinstance(topic, str) or len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopic(f"a topic filter must be a string of at most {MAX_TOPIC_LENGTH} characters")
    storable(topic, "the topic filter", InvalidTopic)


def _check_upcoming_count(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= timing.MAX_FIRE_TIMES:
        raise InvalidCursor(
            f"{name} must be an int from 1 to {timing.MAX_FIRE_TIMES}, got {shown(value)}"
            + (": page on with upcoming_page's next_cursor" if name == "limit" else "")
        )


def _job_fire_times(job: ScheduledJob, n: int) -> list[FireTime]:
    """A stored open job's next fires: its current occurrence at ``run_at`` (a retry's due time,
    or the nominal instant plus spread and the jitter drawn), then the occurrences after it,
    each delayed by the job's spread offset and marked when its calendar excludes it."""
    if job.status not in OPEN_STATUSES:
        return []
    zone = job.zone_for_repeat
    if job.repeat is None:
        return [ahead.fire_at(job.scheduled_for, zone).delayed(job.run_at)]
    # scheduled_for is an occurrence (for an interval, on the fixed-rate grid: the anchor)
    nominal = ahead.repeat_fire_times(
        job.repeat,
        zone,
        job.scheduled_for - _MICROSECOND,
        min(n + 1, timing.MAX_FIRE_TIMES),
        anchor=job.scheduled_for,
    )
    if nominal and nominal[0].at == job.scheduled_for:
        base, rest = nominal[0], nominal[1:]
    else:  # an extra fire from trigger: its instant is no occurrence
        base, rest = ahead.fire_at(job.scheduled_for, zone), nominal
    regular = job.attempt == 1 and job.regular_due is None
    current = base.delayed(job.run_at, excluded=regular and job.excludes(job.scheduled_for))
    following = [
        fire.delayed(fire.at + job.spread_offset, excluded=job.excludes(fire.at))
        for fire in rest
        if fire.at + job.spread_offset > job.run_at  # a retry due later supersedes them
    ]
    # the current occurrence is already due; the ones after it count towards the limit
    after_current = None if job.limit is None else job.limit - job.occurrence_count - 1
    return [current, *bounded_fires(following, after_current, job.ends_at)][:n]


def _statuses(status: JobStatus | str | Iterable[JobStatus | str] | None) -> frozenset[JobStatus]:
    if status is None:
        return frozenset()
    values = [status] if isinstance(status, str) else list(status)
    return frozenset(parse_status(v) for v in values)


def _outcomes(outcome: FireOutcome | str | Iterable[FireOutcome | str] | None) -> frozenset[FireOutcome]:
    if outcome is None:
        return frozenset()
    values = [outcome] if isinstance(outcome, str) else list(outcome)
    return frozenset(parse_outcome(v) for v in values)


def _encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        value = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise InvalidCursor("malformed cursor") from error
    if not ID_PATTERN.fullmatch(value):  # a page's last job id: anything else is no position
        raise InvalidCursor("malformed cursor")
    return value
