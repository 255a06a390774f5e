"""Claim timing: when a worker claims a due row, measured on which clock.

Policy of the core: a store answers claims for the instant it is given; the core decides that
instant (the store's clock as this process knows it, and how far ahead of the due instant).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports.clock import ClaimClock, Clock


def claim_time(clock: Clock) -> datetime | None:
    """What a claimer compares ``run_at`` with: ``clock.claim_now()`` for a :class:`ClaimClock`,
    else ``clock.now()`` (a plain clock, e.g. a test's fake one, is taken as the store's). None:
    claim nothing now."""
    return clock.claim_now() if isinstance(clock, ClaimClock) else clock.now()


#: How long before its due instant a worker claims an occurrence (on a real-time clock): the
#: claim's round trip is then made before the due instant, not after it, and the fire path holds
#: the claimed job until the due instant (:meth:`~schedule_sdk.core.firing.Firing.run`), so the
#: fire still starts no earlier than ``run_at`` on the store's clock.
CLAIM_AHEAD = timedelta(milliseconds=10)
#: The most a claimer looks further ahead than :data:`CLAIM_AHEAD` (the ``sql`` poller starts a
#: claim that much earlier to keep it clear of the due instant of a job it holds).
EXTRA_LEAD = CLAIM_AHEAD / 2


def claim_lead(clock: Clock) -> timedelta:
    """How long before its due instant a claimer on ``clock`` claims a row: :data:`CLAIM_AHEAD`
    on a real-time clock, nothing on any other (a fake clock in tests does not move while the
    fire path would wait for it)."""
    return CLAIM_AHEAD if clock.real_time else timedelta(0)


def claim_horizon(clock: Clock) -> datetime | None:
    """The instant a claimer claims the rows due by: :func:`claim_time` plus :func:`claim_lead`.
    None: claim nothing now."""
    now = claim_time(clock)
    return None if now is None else now + claim_lead(clock)


def due_instant(job: ScheduledJob) -> datetime:
    """The instant a claimed job's fire is held until: its ``run_at``, never before its
    ``scheduled_for``."""
    return max(job.run_at, job.scheduled_for)


def claimed_ahead(job: ScheduledJob, clock: Clock) -> bool:
    """Whether ``job`` (as a claim returned it) may have been claimed before its due instant on
    the store's clock, so that the claim may not have seen a cancel, a pause or a reschedule
    committed before that instant: the fire path then reads the row again once the job is due
    (:meth:`~schedule_sdk.ports.JobStore.still_claimed`).

    A claim returns its rows with ``updated_at`` set to the instant it claimed by (the ``now`` it
    was given), which is at most :data:`CLAIM_AHEAD` plus :data:`EXTRA_LEAD` after an instant
    known to have passed on the store's clock before its statement ran (nothing after it on a
    clock that does not move with real time). A row due by then was due when the claim read it."""
    lead = CLAIM_AHEAD + EXTRA_LEAD if clock.real_time else timedelta(0)
    return job.run_at > job.updated_at - lead
