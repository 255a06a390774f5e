"""Claim timing: when a worker claims a due row, measured on which clock.

Policy of the core: a store answers claims for the instant it is given; the core decides that
instant (the store's clock as this process knows it, and how far ahead of the due instant).
"""

from __future__ import annotations

from datetime import datetime, timedelta

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
