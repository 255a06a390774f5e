"""Misfire policies on the fire path: which late occurrences fire, and which are reported missed.

Pure functions of a claimed job and "now" (see :class:`~schedule_sdk.domain.jobs.MisfirePolicy`
for the rules). :func:`at_start` decides, when a fire starts, whether the claimed occurrence fires
(``skip`` drops a missed one; ``fire_all`` drops the oldest of a backlog longer than its cap);
:func:`following` picks the occurrence after it and the ones coalesced in between. Nothing here
enumerates an unbounded number of occurrences: intervals are counted arithmetically and cron
schedules are counted up to :data:`MAX_COUNTED`.

A repeating job's overlap policy (``ScheduledJob.overlap``) then decides about the occurrences
that came due while the fire ran: :func:`after_overlap`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from schedule_sdk.domain.events import MAX_NAMED_MISSED
from schedule_sdk.domain.jobs import IntervalRepeat, ScheduledJob

#: Most occurrences of a cron schedule counted for one missed event.
MAX_COUNTED = 10_000
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Missed:
    """Occurrences that did not fire: the first few named (earliest first) and how many in all."""

    named: tuple[datetime, ...] = ()
    count: int = 0

    def __add__(self, later: Missed) -> Missed:
        named = (self.named + later.named)[:MAX_NAMED_MISSED]
        return Missed(named, self.count + later.count)


NONE = Missed()


def _occurrences(job: ScheduledJob, first: datetime, end: datetime) -> Iterator[datetime]:
    """The job's due instants from ``first`` (one of them) up to, not including, ``end``."""
    current = first
    while current < end and (job.ends_at is None or current <= job.ends_at):
        yield current
        current = job.next_occurrence_after(current)


def between(job: ScheduledJob, first: datetime, end: datetime) -> Missed:
    """The occurrences from ``first`` (one of the job's due instants) up to ``end`` (excluded)."""
    if job.ends_at is not None:
        end = min(end, job.ends_at + _TICK)
    if first >= end:
        return NONE
    if isinstance(job.repeat, IntervalRepeat):
        step = timedelta(milliseconds=job.repeat.every_ms)
        count = -((first - end) // step)  # ceil((end - first) / step)
        return Missed(tuple(first + i * step for i in range(min(count, MAX_NAMED_MISSED))), count)
    named: list[datetime] = []
    count = 0
    for instant in _occurrences(job, first, end):
        count += 1
        if len(named) < MAX_NAMED_MISSED:
            named.append(instant)
        if count >= MAX_COUNTED:
            break
    return Missed(tuple(named), count)


@dataclass(frozen=True, slots=True)
class Start:
    """What a fire does with its claimed occurrence."""

    #: The job to fire (``fire_all`` may move its ``scheduled_for`` to a later backlog instant).
    job: ScheduledJob
    #: False: the occurrence is missed and skipped (nothing runs).
    fire: bool
    #: Occurrences dropped before it (``fire_all``'s cap).
    missed: Missed = NONE
    #: The occurrence falls on a date the job's calendar excludes (``fire`` is False).
    excluded: bool = False


def at_start(job: ScheduledJob, now: datetime) -> Start:
    """Apply the job's calendar and misfire policy to the occurrence claimed at ``now``. Retries
    and extra fires from ``trigger`` always fire (their occurrence has started, or was asked
    for); an occurrence on an excluded date never fires, however late.

    Lateness counts from the occurrence's actual due instant: its nominal instant plus the
    job's spread offset and the jitter drawn for it (``run_at``). A constant spread offset moves
    the whole schedule, so the backlog of ``fire_all`` is counted at ``now`` minus the offset."""
    policy = job.misfire
    if job.attempt > 1 or job.regular_due is not None:
        return Start(job, True)
    if job.excludes(job.scheduled_for):
        return Start(job, False, excluded=True)
    # Late from the actual due instant: the nominal one plus the spread offset; ``run_at`` when
    # a jitter was drawn for it, or when it is a buffered occurrence (overlap ``buffer_one``),
    # which could fire only once the fire it waited for ended.
    if job.overlap == "buffer_one" or job.jitter_ms:
        since = job.run_at
    else:
        since = job.scheduled_for + job.spread_offset
    if now - since <= policy.grace:
        return Start(job, True)
    if policy.mode == "skip":
        return Start(job, False)
    if policy.mode == "fire_all" and job.repeat is not None:
        kept = _backlog_start(job, now - job.spread_offset, policy.max_catch_up)
        if kept > job.scheduled_for:
            dropped = between(job, job.scheduled_for, kept)
            return Start(job.evolve(scheduled_for=kept), True, dropped)
    return Start(job, True)


def _backlog_start(job: ScheduledJob, now: datetime, cap: int) -> datetime:
    """The earliest overdue occurrence to keep so that at most ``cap`` are due at ``now``."""
    first = job.scheduled_for
    if job.next_occurrence_after(first) > now:
        return first  # a backlog of one
    if isinstance(job.repeat, IntervalRepeat):
        step = timedelta(milliseconds=job.repeat.every_ms)
        due = (now - first) // step + 1
        return first if due <= cap else first + (due - cap) * step
    # Cron: at most one occurrence a minute (a few more in a repeated DST hour), so the last
    # ``cap`` lie within about ``cap`` minutes before now; widen the window until they are found.
    window = timedelta(minutes=cap)
    while True:
        low = max(first, now - window)
        start = first if low == first else job.next_occurrence_after(low - _TICK)
        found = list(_occurrences(job, start, now + _TICK))
        if len(found) >= cap:
            return found[-cap]
        if low == first:
            return first
        window *= 4


def following(job: ScheduledJob, now: datetime) -> tuple[datetime, Missed]:
    """The occurrence after the job's current one (fired or skipped) once it is over at ``now``,
    and the occurrences in between that will not fire (coalesced or skipped).

    ``fire_all``: the very next one (each overdue occurrence fires in turn). Otherwise the first
    that is not missed (at most ``grace_ms`` late): with ``grace_ms`` 0, the first from now on.
    Returned instants are nominal; an occurrence is late by ``now`` minus its nominal instant
    plus the job's spread offset (the jitter of an occurrence is drawn only once it is chosen).
    """
    first = job.next_occurrence_after(job.scheduled_for)
    if job.misfire.mode == "fire_all":
        return first, NONE
    horizon = now - job.spread_offset - job.misfire.grace  # an occurrence at or after this is not missed yet
    if first >= horizon:
        return first, NONE
    after = job.next_occurrence_after(horizon - _TICK)
    return after, between(job, first, after)


@dataclass(frozen=True, slots=True)
class AfterOverlap:
    """The occurrence a repeating job moves to after a fire, once its overlap policy applied."""

    #: Its due instant (the next ``scheduled_for``).
    due: datetime
    #: When it may fire (the next ``run_at``): ``due``, or, for a buffered occurrence, the end
    #: of the fire it waited for.
    run_at: datetime
    #: The occurrences that came due while the fire ran and will not fire.
    overlapped: Missed = NONE


def after_overlap(
    job: ScheduledJob, candidate: datetime, fired_at: datetime, ended: datetime
) -> AfterOverlap:
    """Apply ``job``'s overlap policy to ``candidate``, the occurrence its misfire policy (or a
    trigger's ``regular_due``) picks after a fire that ran from ``fired_at`` to ``ended``.

    Only a candidate due while the fire ran (after ``fired_at``, at or before ``ended``)
    overlaps it; any other, and every candidate of a job without an overlap policy or with
    ``allow`` (whose fires run alongside each other: its hand-over to a run ends at once), is
    kept.
    ``skip``: the job moves to its first occurrence after ``ended``; every occurrence due while
    the fire ran is overlapped. ``buffer_one``: the latest occurrence due while the fire ran
    fires at once (``run_at`` = ``ended``); the ones before it are overlapped.
    """
    if job.overlap in (None, "allow") or not fired_at < candidate <= ended:
        return AfterOverlap(candidate, candidate)
    if job.overlap == "skip":
        after = job.next_occurrence_after(ended)
        return AfterOverlap(after, after, between(job, candidate, after))
    until = ended if job.ends_at is None else min(ended, job.ends_at)
    latest = _backlog_start(job.evolve(scheduled_for=candidate), until, 1)
    return AfterOverlap(latest, ended, between(job, candidate, latest))
