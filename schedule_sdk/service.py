"""``ScheduleService``: the API applications call."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from .domain import timing
from .domain.errors import InvalidCursor, InvalidPayload, JobNotFound, NotReschedulable, RunAtInPast
from .domain.ids import new_id
from .domain.jobs import (
    CronRepeat,
    JobPage,
    JobQuery,
    JobSpec,
    OneShotSpec,
    Repeat,
    RepeatSpec,
    ScheduledJob,
    encode_json,
)
from .domain.status import OPEN_STATUSES, JobStatus
from .domain.timing import FireTime
from .ports import Clock, ExecutionQueue, Guard, JobStore, JobTransaction, Occurrence

logger = logging.getLogger(__name__)

_MICROSECOND = timedelta(microseconds=1)

MAX_PAGE_SIZE = 500


class ScheduleService:
    """Schedule, cancel, reschedule and query jobs.

    Every write follows the dual-store order: one store transaction writes the row and, inside
    it, hands the occurrence to the execution queue; a queue error rolls the row back, and a
    failed commit is followed by withdrawing the queue entry. Invalid input raises a
    :class:`~schedule_sdk.ScheduleValidationError` subclass before anything is written.
    """

    def __init__(
        self, *, store: JobStore, queue: ExecutionQueue, clock: Clock, max_payload_bytes: int = 65_536
    ) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._max_payload_bytes = max_payload_bytes

    def schedule_at(self, spec: OneShotSpec) -> ScheduledJob:
        """Schedule a one-shot job to fire once at ``spec.run_at``.

        :raises RunAtInPast: ``run_at`` is before now.
        :raises ClientRequestIdInUse: ``spec.metadata.client_request_id`` is already used.
        :raises StoreUnavailable, QueueUnavailable: nothing was written.
        """
        if not isinstance(spec, OneShotSpec):
            raise TypeError("schedule_at takes a OneShotSpec")
        job = self._new_job(spec)
        self._write(job)
        return job

    def schedule_repeat(self, spec: RepeatSpec) -> ScheduledJob:
        """Schedule a cron or interval job; its first occurrence is the first one after now."""
        if not isinstance(spec, RepeatSpec):
            raise TypeError("schedule_repeat takes a RepeatSpec")
        job = self._new_job(spec)
        self._write(job)
        return job

    def cancel(self, job_id: str) -> None:
        """Cancel a job. Idempotent: no error if it is already cancelled, completed or failed.
        A cancelled job never fires afterwards, even if its fire was already taken by a worker.

        :raises JobNotFound: no job has this id.
        """
        now = self._clock.now()
        with self._store.transaction() as tx:
            job = tx.get(job_id, for_update=True)
            if job is None:
                raise JobNotFound(job_id)
            if job.status not in OPEN_STATUSES:
                return
            cancelled = job.evolve(
                status=JobStatus.CANCELLED, claimed_by=None, claimed_until=None, updated_at=now
            )
            tx.update(cancelled, Guard(OPEN_STATUSES))
        self._queue.withdraw([Occurrence.of(job)])

    def reschedule(self, job_id: str, spec: JobSpec) -> ScheduledJob:
        """Replace a pending or active job: in one transaction the old job is cancelled and a new
        one (with a new id, linked both ways) is created from ``spec``.

        :raises JobNotFound: no job has this id.
        :raises NotReschedulable: the job is completed, failed or cancelled.
        """
        new = self._new_job(spec)
        old = self._write(new, replace=job_id)
        assert old is not None
        self._queue.withdraw([Occurrence.of(old)])
        return new.evolve(rescheduled_from=job_id)

    def get_by_id(self, job_id: str) -> ScheduledJob | None:
        """The job, or None if no job has this id."""
        return self._store.get(job_id)

    def preview(self, spec_or_job_id: JobSpec | str, n: int = 5) -> list[FireTime]:
        """The next ``n`` (1 to 1000) fire times, in order, of a spec (as if it were scheduled
        now: the first is the ``run_at`` that ``schedule_at`` / ``schedule_repeat`` would store)
        or of a stored job (from its ``run_at``; for a job waiting to retry, the retry comes first).
        The list stops at the spec's or the job's ``limit`` and ``ends_at``; it is empty for a
        completed, failed or cancelled job. Each :class:`~schedule_sdk.FireTime` has the UTC
        instant, the local time in the cron's (else the job's) zone and a DST ``mark``.

        :raises JobNotFound: no job has this id.
        """
        timing.check_count(n)
        if isinstance(spec_or_job_id, str):
            job = self._store.get(spec_or_job_id)
            if job is None:
                raise JobNotFound(spec_or_job_id)
            return _job_fire_times(job, n)
        if isinstance(spec_or_job_id, OneShotSpec):
            return [_fire_at(spec_or_job_id.run_at, spec_or_job_id.timezone)]
        if not isinstance(spec_or_job_id, RepeatSpec):
            raise TypeError("preview takes a OneShotSpec, a RepeatSpec or a job id")
        spec = spec_or_job_id
        fires = _repeat_fire_times(spec.repeat, spec.timezone, self._clock.now(), n)
        return _bounded(fires, spec.limit, spec.ends_at)

    def list(
        self,
        *,
        owner_id: str | None = None,
        tenant_id: str | None = None,
        topic: str | None = None,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> JobPage:
        """A page of jobs matching every given filter, in creation order (keyset pagination:
        pass the returned ``next_cursor`` to get the next page; None means this is the last)."""
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE_SIZE:
            raise InvalidCursor(f"limit must be an int between 1 and {MAX_PAGE_SIZE}")
        query = JobQuery(
            owner_id=owner_id,
            tenant_id=tenant_id,
            topic=topic,
            statuses=_statuses(status),
            limit=limit + 1,
            after_id=_decode_cursor(cursor),
        )
        rows = self._store.list_jobs(query)
        items = rows[:limit]
        more = len(rows) > limit
        return JobPage(items=items, next_cursor=_encode_cursor(items[-1].id) if more else None)

    # -- internals ---------------------------------------------------------------------------

    def _new_job(self, spec: JobSpec) -> ScheduledJob:
        now = self._clock.now()
        if spec.payload is not None and len(encode_json(spec.payload).encode()) > self._max_payload_bytes:
            raise InvalidPayload(f"payload is larger than {self._max_payload_bytes} bytes")
        if isinstance(spec, OneShotSpec):
            if spec.run_at < now:
                raise RunAtInPast(f"run_at {spec.run_at.isoformat()} is before now ({now.isoformat()})")
            first, repeat, limit, ends_at = spec.run_at, None, None, None
        else:
            repeat, limit, ends_at = spec.repeat, spec.limit, spec.ends_at
            first = _first_occurrence(spec, now)
            if ends_at is not None and first > ends_at:
                raise RunAtInPast(f"the first occurrence {first.isoformat()} is after ends_at")
        return ScheduledJob(
            id=new_id(),
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
            created_at=now,
            updated_at=now,
        )

    def _write(self, job: ScheduledJob, replace: str | None = None) -> ScheduledJob | None:
        """Insert ``job`` (cancelling job ``replace`` in the same transaction) in the write order;
        return the replaced job as it was before."""
        occurrence = [Occurrence.of(job)]
        replaced: ScheduledJob | None = None
        enqueued = False
        try:
            with self._store.transaction() as tx:
                if replace is not None:
                    replaced = self._cancel_for_replacement(tx, replace, job)
                    job = job.evolve(rescheduled_from=replace)
                tx.insert(job)
                self._queue.enqueue(occurrence)
                enqueued = True
        except BaseException:
            if enqueued:  # the commit failed after the queue accepted: compensate
                logger.warning("commit failed after enqueue; withdrawing %s", occurrence[0].key)
                self._queue.withdraw(occurrence)
            raise
        self._queue.committed(occurrence)
        return replaced

    def _cancel_for_replacement(self, tx: JobTransaction, job_id: str, new: ScheduledJob) -> ScheduledJob:
        old = tx.get(job_id, for_update=True)
        if old is None:
            raise JobNotFound(job_id)
        if old.status not in OPEN_STATUSES:
            raise NotReschedulable(job_id, old.status.value)
        cancelled = old.evolve(
            status=JobStatus.CANCELLED,
            claimed_by=None,
            claimed_until=None,
            rescheduled_to=new.id,
            updated_at=new.created_at,
        )
        if not tx.update(cancelled, Guard(OPEN_STATUSES)):
            raise NotReschedulable(job_id, "changing")
        return old


def _first_occurrence(spec: RepeatSpec, now: datetime) -> datetime:
    repeat = spec.repeat
    if isinstance(repeat, CronRepeat):
        return timing.next_cron_time(repeat.expression, repeat.timezone or spec.timezone, now)
    return timing.next_interval_time(now, repeat.every_ms, now)


def _fire_at(instant: datetime, zone_name: str) -> FireTime:
    return FireTime(at=instant, local=instant.astimezone(timing.zone(zone_name)))


def _repeat_fire_times(
    repeat: Repeat, zone_name: str, after: datetime, n: int, anchor: datetime | None = None
) -> list[FireTime]:
    if isinstance(repeat, CronRepeat):
        return repeat.next_fire_times(after, n, timezone=zone_name)
    return repeat.next_fire_times(after, n, timezone=zone_name, anchor=anchor)


def _job_fire_times(job: ScheduledJob, n: int) -> list[FireTime]:
    """A stored open job's next fires: ``run_at``, then the occurrences after it."""
    if job.status not in OPEN_STATUSES:
        return []
    current = _fire_at(job.run_at, job.zone_for_repeat)
    if job.repeat is None:
        return [current]
    # scheduled_for is an occurrence (for an interval, on the fixed-rate grid: the anchor)
    following = _repeat_fire_times(
        job.repeat, job.zone_for_repeat, job.run_at - _MICROSECOND, n, anchor=job.scheduled_for
    )
    if not following or following[0].at != job.run_at:  # a retry of the current occurrence
        following = [current, *(f for f in following if f.at > job.run_at)][:n]
    # the current occurrence is already due; the ones after it count towards the limit
    after_current = None if job.limit is None else job.limit - job.occurrence_count - 1
    return [following[0], *_bounded(following[1:], after_current, job.ends_at)]


def _bounded(fires: list[FireTime], limit: int | None, ends_at: datetime | None) -> list[FireTime]:
    kept = [f for f in fires if ends_at is None or f.at <= ends_at]
    return kept if limit is None else kept[:limit]


def _statuses(status: JobStatus | str | Iterable[JobStatus | str] | None) -> frozenset[JobStatus]:
    if status is None:
        return frozenset()
    values = [status] if isinstance(status, str) else list(status)
    try:
        return frozenset(JobStatus(v) for v in values)
    except ValueError as error:
        raise InvalidCursor(f"unknown status in {values!r}") from error


def _encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        value = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise InvalidCursor("malformed cursor") from error
    if len(value) != 36:
        raise InvalidCursor("malformed cursor")
    return value
