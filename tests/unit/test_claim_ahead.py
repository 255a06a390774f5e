"""Claiming ahead of the due instant: on a clock that moves with real time a worker claims rows
due within ``CLAIM_AHEAD`` (so the claim's round trip is over when they fall due); on a fake clock
nothing is claimed ahead. The poller's plan around that: what frees during a claim is judged by
the claim's answer, and no claim starts at the due instant of a job it holds. That the fire path
then holds a job until its ``run_at`` is in tests/integration/test_claim_ahead.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import OneShotSpec
from schedule_sdk.adapters.clock import SystemClock
from schedule_sdk.core.claim_timing import CLAIM_AHEAD, claim_horizon, claim_time
from schedule_sdk.core.store_time import StoreTime
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import DueClaim
from schedule_sdk.substrates.sql.poller import CLEAR_BEFORE, DuePoller
from schedule_sdk.testing import FakeClock, MemoryJobStore, make_test_kit


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


class _RealTimeFake(FakeClock):
    """A fake clock that says it moves with real time: the poller then claims ahead (it is never
    advanced here; only the poller's plan is looked at)."""

    @property
    def real_time(self) -> bool:
        return True


class _Scripted(MemoryJobStore):
    """Answers each claim with the next scripted ``DueClaim``, calling ``during`` first."""

    def __init__(self, *answers: DueClaim, during: Callable[[], None] = lambda: None) -> None:
        super().__init__()
        self.answers = list(answers)
        self.during = during
        self.horizons: list[datetime] = []

    def claim_due_planned(self, now: datetime, limit: int, worker_id: str, lease_until: datetime) -> DueClaim:
        self.horizons.append(now)
        self.during()
        return self.answers.pop(0)


class _Taking(_Dispatcher):
    def __init__(self) -> None:
        self.submitted: list[ScheduledJob] = []

    def submit(self, jobs: Sequence[ScheduledJob]) -> None:
        self.submitted += jobs


T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _poller(store: MemoryJobStore, clock: FakeClock) -> DuePoller:
    return DuePoller(store=store, queue=None, dispatcher=_Taking(), clock=clock)  # type: ignore[arg-type]


@pytest.mark.parametrize("waiting", [False, True])
def test_a_slot_freed_during_a_claim_is_judged_by_that_claims_answer(waiting):
    clock = FakeClock(T0)
    box: list[DuePoller] = []
    store = _Scripted(DueClaim([], T0 + timedelta(seconds=0.5), waiting), during=lambda: box[0]._slot_freed())
    poller = _poller(store, clock)
    box.append(poller)
    sleep = poller._cycle()
    # rows left waiting for a slot: the slot freed meanwhile may be theirs, so claim again at once;
    # none left: another claim would find nothing, so sleep until the next due instant
    assert sleep == (0.0 if waiting else 0.5)
    assert not poller._wakeup.is_set()
    poller._slot_freed()  # between claims: a wake-up only while rows wait
    assert poller._wakeup.is_set() is waiting


def _job_due(at: datetime) -> ScheduledJob:
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_at(OneShotSpec(topic="t.ahead", run_at=at, timezone="UTC"))
    return job.evolve(run_at=at)


def test_the_poller_starts_no_claim_at_the_due_instant_of_a_job_it_holds():
    clock = _RealTimeFake(T0)
    held = _job_due(T0 + timedelta(milliseconds=10))
    # the next due falls CLAIM_AHEAD after the held job's due: the plain plan would claim at it
    later = T0 + timedelta(milliseconds=10) + CLAIM_AHEAD
    store = _Scripted(DueClaim([held], later, False), DueClaim([], None, False))
    poller = _poller(store, clock)
    sleep = poller._cycle()
    assert store.horizons == [T0 + CLAIM_AHEAD]
    # it wakes CLEAR_BEFORE before the held due instant instead ...
    assert sleep == pytest.approx((timedelta(milliseconds=10) - CLEAR_BEFORE).total_seconds())
    # ... and its next claim looks that much further ahead, so it still takes the next job
    poller._cycle()
    assert store.horizons[1] == T0 + CLAIM_AHEAD + CLEAR_BEFORE


def test_the_poller_claims_as_planned_clear_of_the_jobs_it_holds():
    clock = _RealTimeFake(T0)
    held = _job_due(T0 + timedelta(milliseconds=10))
    later = T0 + timedelta(milliseconds=30)  # planned claim at 20 ms: far from the held 10 ms
    store = _Scripted(DueClaim([held], later, False), DueClaim([], None, False))
    poller = _poller(store, clock)
    assert poller._cycle() == pytest.approx(0.02)
    poller._cycle()
    assert store.horizons[1] == T0 + CLAIM_AHEAD
