"""The retry policy's controls: the backoff cap, ``retry_on`` / ``give_up_on`` stored as
qualified names and matched by the raised error's MRO, refused at construction with a typed
error (so nothing is written)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import Backoff, OneShotSpec, RetryPolicy
from schedule_sdk.domain.errors import InvalidRetry, ListenerFailed
from schedule_sdk.testing import make_test_kit


class Transient(ConnectionError):
    pass


def test_the_cap_bounds_exponential_and_fixed_waits() -> None:
    capped = Backoff(type="exponential", delay_ms=1000, max_delay_ms=5000)
    assert [capped.delay_after(n) for n in range(1, 6)] == [1000, 2000, 4000, 5000, 5000]
    assert Backoff(type="exponential", delay_ms=1000).delay_after(100) == 7 * 86_400_000
    assert Backoff(delay_ms=9000, max_delay_ms=2000).delay_after(1) == 2000


def test_names_are_qualified_sorted_and_round_trip_through_the_stored_form() -> None:
    policy = RetryPolicy(attempts=3, retry_on=(Transient, "TimeoutError"), give_up_on=("myapp.Fatal",))
    assert policy.retry_on == ("builtins.TimeoutError", f"{__name__}.Transient")
    assert policy.give_up_on == ("myapp.Fatal",)
    assert RetryPolicy.from_dict(policy.to_dict()) == policy
    assert RetryPolicy(attempts=2).to_dict() == {
        "attempts": 2,
        "backoff": {"type": "fixed", "delay_ms": 1000},
    }


def test_errors_match_by_their_mro_and_give_up_on_wins() -> None:
    policy = RetryPolicy(attempts=3, retry_on=(ConnectionError,), give_up_on=(Transient,))
    assert policy.retries(ConnectionResetError("reset"))  # a subclass of ConnectionError
    assert not policy.retries(KeyError("k"))
    assert not policy.retries(Transient("no"))  # in both: give_up_on wins
    assert policy.retries(ListenerFailed([KeyError("k"), ConnectionError("c")]))  # any listener's
    assert not policy.retries(ListenerFailed([ConnectionError("c"), Transient("t")]))
    assert RetryPolicy(attempts=2).retries(KeyError("k"))  # no lists: every error


@pytest.mark.parametrize(
    "build",
    [
        lambda: RetryPolicy(retry_on=("not a name",)),
        lambda: RetryPolicy(give_up_on=(42,)),
        lambda: RetryPolicy(retry_on=(int,)),  # a type, but no exception
        lambda: RetryPolicy(retry_on=5),
        lambda: Backoff(max_delay_ms=-1),
        lambda: Backoff(max_delay_ms=1.5),
        lambda: Backoff(max_delay_ms=8 * 86_400_000),
    ],
)
def test_a_bad_control_is_a_typed_error_and_nothing_is_written(build) -> None:
    kit = make_test_kit()
    with pytest.raises(InvalidRetry) as raised:
        spec = OneShotSpec(
            topic="t", run_at=datetime.now(UTC) + timedelta(hours=1), timezone="UTC", retry=build()
        )
        kit.service.schedule_at(spec)
    assert raised.value.code == "SCHEDULE_INVALID_RETRY"
    assert kit.service.list().items == []
