"""Claiming ahead of the due instant: on a clock that moves with real time a worker claims rows
due within ``CLAIM_AHEAD`` (so the claim's round trip is over when they fall due); on a fake clock
nothing is claimed ahead. That the fire path then holds a job until its ``run_at`` is in
tests/integration/test_claim_ahead.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from schedule_sdk.adapters.clock import SystemClock
from schedule_sdk.core.store_time import StoreTime
from schedule_sdk.ports import CLAIM_AHEAD, DueClaim, claim_horizon, claim_time
from schedule_sdk.substrates.sql.poller import DuePoller
from schedule_sdk.testing import FakeClock, MemoryJobStore


def test_the_horizon_leads_by_claim_ahead_only_on_a_real_time_clock():
    fake = FakeClock()
    assert not fake.real_time and claim_horizon(fake) == fake.now()
    on_fake = StoreTime(clock=fake, store=MemoryJobStore())
    assert not on_fake.real_time and claim_horizon(on_fake) == claim_time(on_fake)

    real = StoreTime(clock=SystemClock(), store=MemoryJobStore())
    assert real.real_time and SystemClock().real_time
    before = claim_time(real)
    horizon = claim_horizon(real)
    after = claim_time(real)
    assert before is not None and horizon is not None and after is not None
    assert before + CLAIM_AHEAD <= horizon <= after + CLAIM_AHEAD


class _Recording(MemoryJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.claimed_at: list[datetime] = []

    def claim_due_planned(self, now: datetime, limit: int, worker_id: str, lease_until: datetime) -> DueClaim:
        self.claimed_at.append(now)
        return DueClaim([], now + timedelta(seconds=0.5), False)


class _Dispatcher:
    worker_id = "w"

    def capacity(self) -> int:
        return 10

    def submit(self, jobs: object) -> None:
        raise AssertionError("nothing was claimed")


def test_the_poller_claims_at_the_horizon_and_wakes_claim_ahead_before_the_next_due():
    store = _Recording()
    clock = StoreTime(clock=SystemClock(), store=store)
    poller = DuePoller(store=store, queue=None, dispatcher=_Dispatcher(), clock=clock)  # type: ignore[arg-type]
    before = claim_time(clock)
    sleep = poller._cycle()
    [horizon] = store.claimed_at
    assert before is not None and horizon >= before + CLAIM_AHEAD
    # the next due is 0.5 s after the horizon: the poller wakes when it enters the horizon
    assert 0.4 < sleep <= 0.5
