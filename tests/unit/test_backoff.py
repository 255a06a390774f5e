"""The one reconnect backoff (doubles from FIRST up to CAP, and starts over after a success) and
the one retry loop around it, sync and async: no real sleeps (the waits are recorded) and no I/O."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable

import pytest

from schedule_sdk.domain.backoff import CAP, FIRST, Reconnect, retrying, retrying_async

log = logging.getLogger("tests.backoff")


def test_delays_double_up_to_the_cap_and_reset_after_a_success() -> None:
    backoff = Reconnect()
    delays = [backoff.next() for _ in range(10)]
    assert delays[0] == FIRST
    assert all(b == min(a * 2, CAP) for a, b in zip(delays, delays[1:], strict=False))
    assert delays[-1] == CAP
    backoff.reset()
    assert backoff.next() == FIRST


class Boom(Exception):
    pass


class Script:
    """A step that plays ``outcomes`` in order (an exception is raised, a function called, anything
    else returned), then sets ``stop``; ``waits`` records every wait the loop asked for, without
    waiting."""

    def __init__(self, outcomes: Iterable[object], stop: threading.Event | None = None) -> None:
        self.outcomes = list(outcomes)
        self.stop = stop or threading.Event()
        self.calls = 0
        self.waits: list[float] = []

    def step(self) -> float | None:
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if not self.outcomes:
            self.stop.set()
        if callable(outcome):
            outcome = outcome()
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is None or isinstance(outcome, float)
        return outcome

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return False

    async def step_async(self) -> float | None:
        await asyncio.sleep(0)
        return self.step()

    async def wait_async(self, seconds: float) -> None:
        self.wait(seconds)


def run(script: Script, **options: object) -> None:
    kwargs: dict[str, object] = {"errors": (Boom,), "what": "loop", "logger": log, "wait": script.wait}
    kwargs.update(options)
    retrying(script.step, stop=script.stop, **kwargs)  # type: ignore[arg-type]


def run_async(script: Script, **options: object) -> None:
    kwargs: dict[str, object] = {"errors": (Boom,), "what": "loop", "logger": log, "wait": script.wait_async}
    kwargs.update(options)

    async def main() -> None:  # awaited from a coroutine, as a consumer task does
        await retrying_async(script.step_async, stop=script.stop, **kwargs)  # type: ignore[arg-type]

    asyncio.run(main())


RUNNERS: list[Callable[..., None]] = [run, run_async]
both = pytest.mark.parametrize("runner", RUNNERS, ids=["sync", "async"])


@both
def test_errors_wait_the_growing_delay_and_a_success_starts_it_over(
    runner: Callable[..., None], caplog: pytest.LogCaptureFixture
) -> None:
    script = Script([Boom("down"), Boom("still down"), Boom("down again"), 0.0, Boom("down once more"), 0.0])
    with caplog.at_level(logging.WARNING, logger=log.name):
        runner(script)
    assert script.calls == 6
    assert script.waits == [FIRST, FIRST * 2, FIRST * 4, FIRST]
    assert [r.getMessage() for r in caplog.records] == [
        "loop: down; retrying in 0.05s",
        "loop: still down; retrying in 0.10s",
        "loop: down again; retrying in 0.20s",
        "loop: down once more; retrying in 0.05s",
    ]
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in caplog.records)
    assert {r.name for r in caplog.records} == {log.name}  # the caller's logger
    assert {r.filename for r in caplog.records} == {"test_backoff.py"}  # and the caller's line


@both
def test_a_step_s_pause_is_waited_after_a_success_and_zero_is_no_wait(runner: Callable[..., None]) -> None:
    script = Script([0.25, 0.0, 1.5, 0.0])
    runner(script)
    assert script.waits == [0.25, 1.5]


@both
def test_no_progress_keeps_the_backoff_and_waits_nothing(runner: Callable[..., None]) -> None:
    script = Script([Boom("a"), None, None, Boom("b"), 0.0, Boom("c"), 0.0])
    runner(script)
    assert script.waits == [FIRST, FIRST * 2, FIRST]


@both
def test_the_delay_never_exceeds_the_cap(runner: Callable[..., None]) -> None:
    script = Script([Boom("x")] * 12 + [0.0])
    runner(script)
    assert script.waits[-1] == CAP and max(script.waits) == CAP


@both
def test_an_error_of_another_type_ends_the_loop_without_a_wait(runner: Callable[..., None]) -> None:
    script = Script([Boom("retried"), KeyError("not retried"), 0.0])
    with pytest.raises(KeyError):
        runner(script)
    assert script.calls == 2 and script.waits == [FIRST]


@both
def test_unexpected_errors_are_logged_with_their_traceback_and_retried(
    runner: Callable[..., None], caplog: pytest.LogCaptureFixture
) -> None:
    script = Script([KeyError("bug"), Boom("down"), KeyError("bug"), 0.0])
    with caplog.at_level(logging.WARNING, logger=log.name):
        runner(script, unexpected=(Exception,))
    assert script.waits == [FIRST, FIRST * 2, FIRST * 4]
    records = [(r.levelno, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert records == [
        (logging.ERROR, "loop: unexpected error; retrying in 0.05s", True),
        (logging.WARNING, "loop: down; retrying in 0.10s", False),
        (logging.ERROR, "loop: unexpected error; retrying in 0.20s", True),
    ]


@both
def test_an_error_without_a_message_is_logged_by_its_repr(
    runner: Callable[..., None], caplog: pytest.LogCaptureFixture
) -> None:
    script = Script([Boom(), 0.0])
    with caplog.at_level(logging.WARNING, logger=log.name):
        runner(script)
    assert caplog.records[0].getMessage() == "loop: Boom(); retrying in 0.05s"


@both
def test_a_stop_set_before_the_start_calls_nothing(runner: Callable[..., None]) -> None:
    script = Script([0.0])
    script.stop.set()
    runner(script)
    assert script.calls == 0 and script.waits == []


@both
def test_a_stop_during_a_step_ends_the_loop_after_it_even_when_it_failed(runner: Callable[..., None]) -> None:
    script = Script([Boom("last")])  # sets stop, then raises
    runner(script)
    assert script.calls == 1 and script.waits == [FIRST]  # then no other call


def test_the_default_wait_is_the_stop_event_so_a_stop_ends_a_delay_at_once() -> None:
    delays: list[float] = []

    class StopDuringTheDelay(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            assert timeout is not None
            delays.append(timeout)
            self.set()  # the stop arrives during the delay: the wait returns at once
            return super().wait(timeout)

    stop = StopDuringTheDelay()
    script = Script([Boom("down"), Boom("down"), 0.0], stop)
    retrying(script.step, stop=stop, errors=(Boom,), what="loop", logger=log)
    assert script.calls == 1 and delays == [FIRST]


def test_a_wait_cut_short_by_a_wake_up_still_goes_on_with_the_next_step() -> None:
    """The poller waits on its wake-up event: a wake-up ends a pause or a delay early, the loop
    goes on, and the backoff is as it was."""
    wake = threading.Event()
    wake.set()  # every wait returns at once
    script = Script([Boom("a"), 2.0, Boom("b"), Boom("c"), 0.0])
    waited: list[float] = []

    def wait(seconds: float) -> bool:
        waited.append(seconds)
        return wake.wait(seconds)

    retrying(script.step, stop=script.stop, wait=wait, errors=(Boom,), what="poller", logger=log)
    assert script.calls == 5 and waited == [FIRST, 2.0, FIRST, FIRST * 2]


@both
def test_a_long_running_step_resets_the_backoff_it_was_given_once_connected(
    runner: Callable[..., None],
) -> None:
    """A listener holds its connection inside one step: it resets the backoff when it connects,
    so a drop after a good while retries after the first delay again."""
    backoff = Reconnect()

    def connects_then_drops() -> None:
        backoff.reset()
        raise Boom("dropped")

    refused = Boom("refused")
    script = Script([refused, refused, connects_then_drops, refused, refused])
    runner(script, backoff=backoff)
    assert script.waits == [FIRST, FIRST * 2, FIRST, FIRST * 2, FIRST * 4]


def test_a_step_that_sets_its_own_stop_is_retried_until_it_succeeds_once() -> None:
    """Outcome recording: its own event is the stop, set by the try that gets through, and the
    wait between tries is a plain sleep."""
    done = threading.Event()
    outcomes: list[Exception | None] = [Boom("store down"), Boom("store down"), None]
    slept: list[float] = []

    def record() -> float:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome
        done.set()
        return 0.0

    retrying(record, stop=done, wait=slept.append, errors=(Boom,), what="recording 2 outcomes", logger=log)
    assert outcomes == [] and slept == [FIRST, FIRST * 2]


def test_the_async_loop_stops_on_an_asyncio_event() -> None:
    async def main() -> list[float]:
        stop = asyncio.Event()
        waits: list[float] = []
        calls = 0

        async def step() -> float | None:
            nonlocal calls
            calls += 1
            if calls == 3:
                stop.set()
            raise Boom("down")

        async def wait(seconds: float) -> None:
            waits.append(seconds)

        await retrying_async(step, stop=stop, wait=wait, errors=(Boom,), what="loop", logger=log)
        return waits

    assert asyncio.run(main()) == [FIRST, FIRST * 2, FIRST * 4]
