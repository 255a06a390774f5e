"""``ScheduleService``: the API applications call."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Iterable
from datetime import datetime

from .domain import timing
from .domain.errors import InvalidCursor, InvalidPayload, JobNotFound, NotReschedulable, RunAtInPast
from .domain.ids import new_id
from .domain.jobs import (
    CronRepeat,
    JobPage,
    JobQuery,
    JobSpec,
    OneShotSpec,
    RepeatSpec,
    ScheduledJob,
    encode_json,
)
from .domain.status import OPEN_STATUSES, JobStatus
from .ports import Clock, ExecutionQueue, Guard, JobStore, JobTransaction, Occurrence

logger = logging.getLogger(__name__)

MAX_PAGE_SIZE = 500


class ScheduleService:
    """Schedule, cancel, reschedule and query jobs.

    Every write follows the dual-store order: one store transaction writes the row and, inside
    it, hands the occurrence to the execution queue; a queue error rolls the row back, and a
    failed commit is followed by withdrawing the queue entry. Invalid input raises a
    :class:`~schedule_sdk.ScheduleValidationError` subclass before anything is written.

    The writes also take ``connection=``: the caller's SQLAlchemy ``Connection`` or ``Session`` on
    the database that holds the SDK's tables. The row is then written in the caller's open
    transaction and the hand-off to the execution queue happens after the caller commits; if the
    caller rolls back, the job never existed. If such a call raises, roll the transaction back.
    """

    def __init__(
        self, *, store: JobStore, queue: ExecutionQueue, clock: Clock, max_payload_bytes: int = 65_536
    ) -> None:
        self._store = store
        self._queue = queue
        self._clock = clock
        self._max_payload_bytes = max_payload_bytes

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

    def cancel(self, job_id: str, *, connection: object | None = None) -> None:
        """Cancel a job. Idempotent: no error if it is already cancelled, completed or failed.
        A cancelled job never fires afterwards, even if its fire was already taken by a worker.

        :raises JobNotFound: no job has this id.
        """
        now = self._clock.now()
        if connection is not None:
            with self._store.join(connection) as joined:
                open_job = _cancel_in(joined, job_id, now)
                if open_job is not None:
                    withdrawn = [Occurrence.of(open_job)]
                    joined.when_done(lambda: self._queue.withdraw(withdrawn), lambda: None)
            return
        with self._store.transaction() as tx:
            open_job = _cancel_in(tx, job_id, now)
        if open_job is not None:
            self._queue.withdraw([Occurrence.of(open_job)])

    def reschedule(self, job_id: str, spec: JobSpec, *, connection: object | None = None) -> ScheduledJob:
        """Replace a pending or active job: in one transaction the old job is cancelled and a new
        one (with a new id, linked both ways) is created from ``spec``.

        :raises JobNotFound: no job has this id.
        :raises NotReschedulable: the job is completed, failed or cancelled.
        """
        new = self._new_job(spec)
        old = self._write(new, replace=job_id, connection=connection)
        assert old is not None
        if connection is None:  # in the caller's transaction, this happens after its commit
            self._queue.withdraw([Occurrence.of(old)])
        return new.evolve(rescheduled_from=job_id)

    def get_by_id(self, job_id: str) -> ScheduledJob | None:
        """The job, or None if no job has this id."""
        return self._store.get(job_id)

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

    def _write(
        self, job: ScheduledJob, replace: str | None = None, connection: object | None = None
    ) -> ScheduledJob | None:
        """Insert ``job`` (cancelling job ``replace`` in the same transaction) in the write order;
        return the replaced job as it was before."""
        if connection is not None:
            return self._write_joined(job, replace, connection)
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

    # -- in the caller's transaction (connection=) -----------------------------------------------

    def _write_joined(
        self, job: ScheduledJob, replace: str | None, connection: object
    ) -> ScheduledJob | None:
        """``_write`` in the caller's transaction. The occurrence is handed over first (staged:
        it cannot fire before ``committed``), so a queue error leaves nothing in that transaction;
        ``committed`` runs after the caller commits, ``withdraw`` if it rolls back."""
        occurrence = [Occurrence.of(job)]
        self._queue.enqueue(occurrence)
        replaced: ScheduledJob | None = None
        try:
            with self._store.join(connection) as joined:
                if replace is not None:
                    replaced = self._cancel_for_replacement(joined, replace, job)
                    job = job.evolve(rescheduled_from=replace)
                joined.insert(job)
                superseded = [] if replaced is None else [Occurrence.of(replaced)]

                def committed() -> None:
                    self._queue.committed(occurrence)
                    if superseded:
                        self._queue.withdraw(superseded)

                joined.when_done(committed, lambda: self._queue.withdraw(occurrence))
        except BaseException:
            self._queue.withdraw(occurrence)
            raise
        return replaced

    # -- end of the caller's-transaction section ------------------------------------------------

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


def _cancel_in(tx: JobTransaction, job_id: str, now: datetime) -> ScheduledJob | None:
    """Cancel job ``job_id`` in ``tx``; return it as it was if it was open (None if finished).

    :raises JobNotFound: no job has this id.
    """
    job = tx.get(job_id, for_update=True)
    if job is None:
        raise JobNotFound(job_id)
    if job.status not in OPEN_STATUSES:
        return None
    cancelled = job.evolve(status=JobStatus.CANCELLED, claimed_by=None, claimed_until=None, updated_at=now)
    tx.update(cancelled, Guard(OPEN_STATUSES))
    return job


def _first_occurrence(spec: RepeatSpec, now: datetime) -> datetime:
    repeat = spec.repeat
    if isinstance(repeat, CronRepeat):
        return timing.next_cron_time(repeat.expression, repeat.timezone or spec.timezone, now)
    return timing.next_interval_time(now, repeat.every_ms, now)


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
