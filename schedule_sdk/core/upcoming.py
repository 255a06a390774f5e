"""What fires next across the open jobs (:meth:`ScheduleService.upcoming` and its page and
grouped forms).

Per job, the fires of a window are counted without building them: an interval by arithmetic on
its fixed-rate grid, a cron by one enumeration of its instants shared by every job on the same
expression, zone and current occurrence (a read's :class:`CronCounts`). Only the fires shown are
built (with their local times and DST marks), pulled job by job in time order.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import itertools
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta

from schedule_sdk.domain import timing
from schedule_sdk.domain.errors import InvalidCursor
from schedule_sdk.domain.ids import ID_PATTERN
from schedule_sdk.domain.jobs import CronRepeat, IntervalRepeat, JobQuery, Repeat, ScheduledJob
from schedule_sdk.domain.status import OPEN_STATUSES, JobStatus
from schedule_sdk.domain.timing import FireTime
from schedule_sdk.domain.upcoming import UpcomingFire, UpcomingGroup, UpcomingGroups, UpcomingPage
from schedule_sdk.ports import JobStore

_MICROSECOND = timedelta(microseconds=1)
#: The earliest instant a cursor may name (no fire of an open job is due before it).
_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
#: How far past a job's current occurrence a cron's fires are counted; past it, a lower bound.
COUNT_HORIZON = timedelta(days=3660)
#: The most fires of one cron in a day (one a minute): what enumerating the day of a DST change
#: may find.
MAX_COUNTED = 1440 + 60
_CHUNK = timedelta(days=28)
_DAY = timedelta(days=1)

#: A position in the time order of fires: the fire's instant and its job's id.
Key = tuple[datetime, str]


def fire_at(instant: datetime, zone_name: str) -> FireTime:
    return FireTime(at=instant, local=timing.local_time(instant, timing.zone(zone_name)))


def repeat_fire_times(
    repeat: Repeat, zone_name: str, after: datetime, n: int, anchor: datetime | None = None
) -> list[FireTime]:
    if isinstance(repeat, CronRepeat):
        return repeat.next_fire_times(after, n, timezone=zone_name)
    return repeat.next_fire_times(after, n, timezone=zone_name, anchor=anchor)


def current_fire(job: ScheduledJob, counts: CronCounts | None = None) -> FireTime:
    """A stored open job's current occurrence at ``run_at`` (a retry's due time, or the nominal
    instant plus spread and the jitter drawn), marked when its calendar excludes it."""
    zone = job.zone_for_repeat
    if job.repeat is None:
        return fire_at(job.scheduled_for, zone).delayed(job.run_at)
    after = job.scheduled_for - _MICROSECOND
    if counts is None:
        nominal = repeat_fire_times(job.repeat, zone, after, 1, anchor=job.scheduled_for)
    else:
        nominal = counts.fire_times(job.repeat, zone, after, 1, job.scheduled_for)
    base = nominal[0] if nominal and nominal[0].at == job.scheduled_for else fire_at(job.scheduled_for, zone)
    regular = job.attempt == 1 and job.regular_due is None
    return base.delayed(job.run_at, excluded=regular and job.excludes(job.scheduled_for))


class CronCounts:
    """One read's count of the occurrences of a job after its current one: ``upto(job, x)`` is
    how many nominal occurrences lie in ``(scheduled_for, x]``: an interval's by arithmetic, a
    cron's from its fields (:func:`~schedule_sdk.domain.timing.count_cron_fires`) or, across a DST
    change, by enumerating the day of the change. The
    fires of a cron are built once per read for the jobs that share them (:meth:`fire_times`)."""

    def __init__(self) -> None:
        self._counted: dict[tuple[str, str, datetime, datetime], int] = {}
        self._fires: dict[tuple[str, str, datetime, int], list[FireTime]] = {}
        #: A count was asked past :data:`COUNT_HORIZON`: it is a lower bound.
        self.capped = False

    def fire_times(
        self, repeat: Repeat, zone_name: str, after: datetime, n: int, anchor: datetime
    ) -> list[FireTime]:
        """:func:`repeat_fire_times`, a cron's kept for the read."""
        if not isinstance(repeat, CronRepeat):
            return repeat_fire_times(repeat, zone_name, after, n, anchor)
        key = (repeat.expression, zone_name, after, n)
        found = self._fires.get(key)
        if found is None:
            found = self._fires[key] = repeat_fire_times(repeat, zone_name, after, n, anchor)
        return found

    def upto(self, job: ScheduledJob, x: datetime) -> int:
        start = job.scheduled_for
        if x <= start:
            return 0
        repeat = job.repeat
        if isinstance(repeat, IntervalRepeat):
            return (x - start) // timedelta(milliseconds=repeat.every_ms)
        assert isinstance(repeat, CronRepeat)
        key = (repeat.expression, job.zone_for_repeat, start, x)
        counted = self._counted.get(key)
        if counted is None:
            counted = self._counted[key] = self._count(*key)
        return counted

    def _count(self, expression: str, zone_name: str, start: datetime, x: datetime) -> int:
        """A cron's fires in ``(start, x]``: four weeks at a time from its fields; a span with a
        DST change day by day, and the day of the change by enumerating it. Past
        :data:`COUNT_HORIZON` from ``start`` it stops (:attr:`capped`: a lower bound)."""
        if x - start > COUNT_HORIZON:
            self.capped = True
            x = start + COUNT_HORIZON
        total, low = 0, start
        while low < x:
            high = min(low + _CHUNK, x)
            counted = timing.count_cron_fires(expression, zone_name, low, high)
            if counted is None:
                counted, day = 0, low
                while day < high:
                    end = min(day + _DAY, high)
                    one = timing.count_cron_fires(expression, zone_name, day, end)
                    if one is None:
                        one = len(timing.cron_instants(expression, zone_name, day, end, MAX_COUNTED))
                    counted, day = counted + one, end
            total, low = total + counted, high
        return total


def window_fires(
    job: ScheduledJob, end: datetime, n: int, counts: CronCounts, after: Key | None = None
) -> tuple[list[FireTime], int]:
    """The first ``n`` fires of ``job`` due at most at ``end`` and after the position ``after``
    (None: from its current occurrence), and how many such fires it has (only those ``n`` built).
    An occurrence after the current one is delayed by the spread offset, bounded by the job's
    ``limit`` and ``ends_at``, and superseded by a retry due later (as
    :meth:`ScheduleService.preview` shows them)."""
    if job.status not in OPEN_STATUSES:
        return [], 0

    def later(at: datetime) -> bool:
        return after is None or (at, job.id) > after

    current = current_fire(job, counts)
    fires = [current] if current.at <= end and later(current.at) else []
    count = len(fires)
    if job.repeat is None:
        return fires[:n], count
    remaining = None if job.limit is None else job.limit - job.occurrence_count - 1
    offset = job.spread_offset
    lowest = job.run_at  # a following fire is due strictly after this (and after ``after``)
    if after is not None:
        lowest = max(lowest, after[0] - _MICROSECOND if job.id > after[1] else after[0])
    nominal_low = max(job.scheduled_for, lowest - offset)
    bound = end - offset if job.ends_at is None else min(end - offset, job.ends_at)
    if bound <= nominal_low or (remaining is not None and remaining <= 0):
        return fires[:n], count
    below, upto = counts.upto(job, nominal_low), counts.upto(job, bound)
    if remaining is not None:
        upto = min(upto, remaining)
    more = max(0, upto - below)
    take = min(n - len(fires), more)
    if take > 0:
        nominal = counts.fire_times(
            job.repeat, job.zone_for_repeat, nominal_low, min(take, timing.MAX_FIRE_TIMES), job.scheduled_for
        )
        fires.extend(f.delayed(f.at + offset, excluded=job.excludes(f.at)) for f in nominal)
    return fires[:n], count + more


def upcoming_fire(job: ScheduledJob, fire: FireTime) -> UpcomingFire:
    return UpcomingFire(
        job_id=job.id,
        topic=job.topic,
        tenant_id=job.metadata.tenant_id,
        fire=fire,
        paused=job.status is JobStatus.PAUSED,
    )


def open_jobs(
    store: JobStore, page_size: int, *, topic: str | None, tenant: str | None, owner: str | None
) -> Iterator[ScheduledJob]:
    """Every open job of the filter, read a page at a time."""
    after_id: str | None = None
    while True:
        query = JobQuery(
            owner_id=owner,
            tenant_id=tenant,
            topic=topic,
            statuses=OPEN_STATUSES,
            limit=page_size,
            after_id=after_id,
        )
        page = store.list_jobs(query)
        yield from page
        if len(page) < page_size:
            return
        after_id = page[-1].id


def _job_stream(
    job: ScheduledJob, end: datetime, counts: CronCounts, after: Key | None
) -> Iterator[UpcomingFire]:
    """The job's fires in time order, built a growing batch at a time as they are pulled."""
    size = 1
    while True:
        batch, _ = window_fires(job, end, size, counts, after)
        yield from (upcoming_fire(job, fire) for fire in batch)
        if len(batch) < size:
            return
        after = (batch[-1].at, job.id)
        size = min(size * 2, timing.MAX_FIRE_TIMES)


def page_of(jobs: Iterable[ScheduledJob], end: datetime, limit: int, cursor: str | None) -> UpcomingPage:
    """The first ``limit`` fires (of ``jobs``, due at most at ``end``) after ``cursor``."""
    after = decode_cursor(cursor)
    counts = CronCounts()
    listed = list(jobs)
    total = sum(window_fires(job, end, 0, counts, after)[1] for job in listed)
    streams = [_job_stream(job, end, counts, after) for job in listed]
    merged = heapq.merge(*streams, key=lambda f: (f.at, f.job_id))
    items = list(itertools.islice(merged, limit))
    truncated = total > len(items)
    last = items[-1] if items else None
    return UpcomingPage(
        items=items,
        total=total,
        truncated=truncated,
        next_cursor=encode_cursor((last.at, last.job_id)) if truncated and last is not None else None,
        exact=not counts.capped,
    )


def groups_of(jobs: Iterable[ScheduledJob], end: datetime, per_job: int, limit: int) -> UpcomingGroups:
    """Each of ``jobs`` with a fire due at most at ``end``: its first ``per_job`` fires and its
    count, ordered by its first fire; the first ``limit`` of them."""
    counts = CronCounts()
    groups: list[UpcomingGroup] = []
    for job in jobs:
        fires, count = window_fires(job, end, per_job, counts)
        if not fires:
            continue
        groups.append(
            UpcomingGroup(
                job_id=job.id,
                topic=job.topic,
                tenant_id=job.metadata.tenant_id,
                owner_id=job.metadata.owner_id,
                paused=job.status is JobStatus.PAUSED,
                count=count,
                fires=fires,
                exact=not counts.capped,
            )
        )
    groups.sort(key=lambda g: (g.first, g.job_id))
    return UpcomingGroups(
        groups=groups[:limit],
        jobs=len(groups),
        fires=sum(g.count for g in groups),
        truncated=len(groups) > limit,
        exact=not counts.capped,
    )


def encode_cursor(key: Key) -> str:
    text = f"{key[0].isoformat()}|{key[1]}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> Key | None:
    """The position a page's ``next_cursor`` names (None: none).

    :raises InvalidCursor: it is no cursor of an upcoming page."""
    if cursor is None:
        return None
    try:
        text = base64.urlsafe_b64decode(str(cursor) + "=" * (-len(str(cursor)) % 4)).decode()
        at_text, _, job_id = text.partition("|")
        at = datetime.fromisoformat(at_text)
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise InvalidCursor("malformed cursor") from error
    if at.utcoffset() is None or not ID_PATTERN.fullmatch(job_id):
        raise InvalidCursor("malformed cursor")
    try:
        at = at.astimezone(UTC)
    except OverflowError as error:
        raise InvalidCursor("malformed cursor") from error
    if not _EARLIEST <= at <= timing.MAX_INSTANT:
        raise InvalidCursor("malformed cursor")
    return at, job_id
