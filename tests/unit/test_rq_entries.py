"""How long a released RQ job is held for its due instant, and when the pump releases it, on a
virtual clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schedule_sdk.substrates.rq import entries
from schedule_sdk.substrates.rq.entries import DUE_META, hold_until_due
from schedule_sdk.substrates.rq.pump import RELEASE_AHEAD, DuePump
from schedule_sdk.testing import FakeClock

T0 = 1_900_000_000.0  # epoch seconds


class VirtualTime:
    """Stands in for the ``time`` module in :mod:`entries`: ``sleep`` moves ``time()`` on."""

    def __init__(self) -> None:
        self.now = T0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> VirtualTime:
    virtual = VirtualTime()
    monkeypatch.setattr(entries, "time", virtual)
    return virtual


def test_a_held_job_is_let_go_at_its_due_instant_and_never_before(clock: VirtualTime) -> None:
    due = T0 * 1000 + 130
    hold_until_due({DUE_META: due})
    assert clock.now * 1000 >= due
    assert clock.now - T0 < 0.13 + 0.001  # let go at once when due, not a poll later
    assert clock.slept and max(clock.slept) <= 0.05  # in short steps, so a stop is heard


@pytest.mark.parametrize("meta", [None, {}, {DUE_META: "soon"}, {DUE_META: True}, {DUE_META: 0}])
def test_no_hold_without_a_future_due_instant(clock: VirtualTime, meta: object) -> None:
    hold_until_due(meta)
    assert clock.slept == []


def test_a_hold_is_bounded_and_ends_at_a_stop(clock: VirtualTime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entries, "MAX_HOLD", 0.05)
    hold_until_due({DUE_META: T0 * 1000 + 3_600_000})  # not the pump's: an hour ahead
    assert clock.now - T0 == pytest.approx(0.05)  # held MAX_HOLD, not an hour
    clock.slept.clear()
    hold_until_due({DUE_META: clock.now * 1000 + 10_000}, stop=lambda: True)
    assert clock.slept == []


class SlowRelease:
    """A delay index whose release takes ``took`` seconds of the clock and leaves the next entry
    due ``next_in`` seconds after the release began."""

    queue_name = "q"

    def __init__(self, clock: FakeClock, took: float, next_in: float) -> None:
        self.clock, self.took, self.next_in = clock, took, next_in
        self.until: list[float] = []

    def release(self, until_ms: float, limit: int) -> tuple[list[str], float | None]:
        began = self.clock.now().timestamp() * 1000.0
        self.until.append(until_ms)
        self.clock.advance(self.took)
        return ["a_1_1"], began + self.next_in * 1000.0


def test_the_pump_wakes_its_lead_before_the_next_entry_however_long_a_release_takes() -> None:
    """The wait to the next release is planned from the end of this one: a release that took
    3 ms of round trips does not make the next come 3 ms closer to its due instant."""
    clock = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    index = SlowRelease(clock, took=0.003, next_in=0.020)
    pump = DuePump(index, clock=clock)  # type: ignore[arg-type]
    wait = pump._cycle()
    assert index.until == [
        pytest.approx(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1000 + RELEASE_AHEAD * 1000)
    ]
    # the next entry is due 17 ms after the release ended: it is released RELEASE_AHEAD before
    assert wait == pytest.approx(0.020 - 0.003 - RELEASE_AHEAD, abs=1e-6)
