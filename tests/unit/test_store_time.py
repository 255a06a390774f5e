"""StoreTime: claims by the store's clock, from the offset measured against it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import StoreUnavailable
from schedule_sdk.core.claim_timing import claim_time
from schedule_sdk.core.store_time import SAMPLES, ClockReading, StoreTime
from schedule_sdk.testing import FakeClock, MemoryJobStore

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class StoreWithClock(MemoryJobStore):
    """The in-memory store, with a clock of its own ``ahead`` seconds ahead of ``clock``; it does
    not answer while ``down``."""

    def __init__(self, clock: FakeClock, ahead: float) -> None:
        super().__init__()
        self.clock = clock
        self.ahead = ahead
        self.down = False
        self.reads = 0

    def store_clock(self) -> datetime | None:
        if self.down:
            raise StoreUnavailable("down")
        self.reads += 1
        return self.clock.now() + timedelta(seconds=self.ahead)


@pytest.mark.parametrize("ahead", [2.0, -2.0, 0.0])
def test_claims_read_the_stores_clock_whatever_the_local_clock_says(ahead: float) -> None:
    clock = FakeClock(T0)
    time = StoreTime(clock=clock, store=StoreWithClock(clock, ahead), max_offset=5.0)
    reading = time.measure()
    assert reading.offset == pytest.approx(ahead, abs=0.01)
    assert 0 <= reading.error < 0.01
    assert time.now() == clock.now() + timedelta(seconds=reading.offset)
    claim = claim_time(time)
    assert claim is not None
    # never later than the store's now: the error bound is taken off
    assert claim <= T0 + timedelta(seconds=ahead) and claim == time.now() - timedelta(seconds=reading.error)


def test_nothing_is_claimed_beyond_the_bound_and_claims_resume_within_it() -> None:
    clock = FakeClock(T0)
    store = StoreWithClock(clock, 2.0)
    time = StoreTime(clock=clock, store=store, max_offset=1.0)
    time.measure()
    assert claim_time(time) is None
    store.ahead = 0.5
    time.measure()
    assert claim_time(time) is not None


def test_nothing_is_claimed_while_the_offset_is_unknown() -> None:
    clock = FakeClock(T0)
    store = StoreWithClock(clock, 1.0)
    store.down = True
    time = StoreTime(clock=clock, store=store, refresh_after=0.0)
    assert time.reading is None and claim_time(time) is None
    assert time.now() == T0  # the local clock while never measured
    store.down = False
    assert claim_time(time) is not None  # measured when it claims
    store.down = True
    assert claim_time(time) is None  # the reading is older than refresh_after and cannot be renewed


def test_a_fresh_reading_is_reused_and_a_stale_one_renewed() -> None:
    clock = FakeClock(T0)
    store = StoreWithClock(clock, 1.0)
    time = StoreTime(clock=clock, store=store, refresh_after=3600.0)
    claim_time(time)
    claim_time(time)
    assert store.reads == SAMPLES  # one measurement
    stale = StoreTime(clock=clock, store=store, refresh_after=0.0)
    claim_time(stale)
    claim_time(stale)
    assert store.reads == 3 * SAMPLES


def test_a_store_without_a_clock_of_its_own_has_offset_zero() -> None:
    clock = FakeClock(T0)
    time = StoreTime(clock=clock, store=MemoryJobStore())
    reading = time.measure()
    assert (reading.offset, reading.error) == (0.0, 0.0)
    assert claim_time(time) == T0


def test_a_plain_clock_is_taken_as_the_stores() -> None:
    clock = FakeClock(T0)
    assert claim_time(clock) == T0


class StoreWithSlowReads(StoreWithClock):
    """Its round trips take the given seconds in turn (on the fake clock's monotonic time)."""

    def __init__(self, clock: FakeClock, ahead: float, trips: list[float]) -> None:
        super().__init__(clock, ahead)
        self.trips = trips

    def store_clock(self) -> datetime | None:
        trip = self.trips[self.reads % len(self.trips)]
        self.clock.advance(trip / 2)
        value = super().store_clock()
        self.clock.advance(trip / 2)
        return value


def test_a_measurement_keeps_the_tightest_of_its_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    """A round trip widened by a busy process (here the second of three) does not widen the
    margin every claim takes off: the narrowest one is kept, and its bound still holds."""
    clock = FakeClock(T0)
    monkeypatch.setattr("schedule_sdk.core.store_time.time.monotonic", lambda: clock.now().timestamp())
    store = StoreWithSlowReads(clock, 1.5, [0.004, 0.0002, 0.010])
    time = StoreTime(clock=clock, store=store)
    reading = time.measure()
    assert store.reads == SAMPLES == 3
    assert reading.error == pytest.approx(0.0001, abs=1e-6)
    assert abs(reading.offset - 1.5) <= reading.error + 1e-6


class RealTimeFakeClock(FakeClock):
    """A fake clock that claims to move with real time (as the system clock does)."""

    @property
    def real_time(self) -> bool:
        return True


def test_a_fire_held_to_its_due_instant_never_reads_early_after_a_lower_measurement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hold waits until ``claim_now()`` reaches ``run_at``; a new measurement just after it may
    lower the offset by up to its error (each bounds the true offset, both hold), and the fire is
    stamped by ``now()``: it must not read before ``run_at``."""
    clock = RealTimeFakeClock(T0)
    monkeypatch.setattr("schedule_sdk.core.store_time.time.monotonic", lambda: clock.now().timestamp())
    # the true offset is 1.0 s: the first measurement reads 1.001 ± 0.001, the second 0.9995 ± 0.0005
    store = StoreWithSlowReads(clock, 1.0, [0.002])
    time = StoreTime(clock=clock, store=store, refresh_after=3600.0)
    time.measure()
    time._reading = ClockReading(1.001, 0.001, time._reading.taken if time._reading else 0.0)
    held_until = time.claim_now()
    assert held_until is not None
    run_at = held_until  # the hold's sleep ends here
    time._reading = ClockReading(0.9995, 0.0005, time._reading.taken)  # the heartbeat measures again
    assert clock.now() + timedelta(seconds=0.9995) < run_at  # the bare estimate would read early
    assert time.now() >= run_at
    clock.advance(0.002)
    assert time.now() >= run_at + timedelta(seconds=0.002)  # and it moves on with the time elapsed
    clock.advance(3600.0)  # past refresh_after the floor is gone: the estimate again
    assert time.now() == clock.now() + timedelta(seconds=0.9995)


def test_a_clock_that_does_not_move_with_real_time_keeps_the_bare_estimate() -> None:
    clock = FakeClock(T0)
    time = StoreTime(clock=clock, store=StoreWithClock(clock, 1.0))
    time.measure()
    assert time.claim_now() is not None
    time._reading = ClockReading(0.5, 0.0, time._reading.taken if time._reading else 0.0)
    assert time.now() == T0 + timedelta(seconds=0.5)
