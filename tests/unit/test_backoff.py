"""The one reconnect backoff: doubles from FIRST up to CAP, and starts over after a success."""

from __future__ import annotations

from schedule_sdk.domain.backoff import CAP, FIRST, Reconnect


def test_delays_double_up_to_the_cap_and_reset_after_a_success() -> None:
    backoff = Reconnect()
    delays = [backoff.next() for _ in range(10)]
    assert delays[0] == FIRST
    assert all(b == min(a * 2, CAP) for a, b in zip(delays, delays[1:], strict=False))
    assert delays[-1] == CAP
    backoff.reset()
    assert backoff.next() == FIRST
