"""The due poller's stop ends its sleep, even one a claim started right after the stop was given."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from schedule_sdk.adapters.clock import SystemClock
from schedule_sdk.ports import DueClaim
from schedule_sdk.substrates.sql.poller import DuePoller
from schedule_sdk.substrates.sql.queue import SQLExecutionQueue
from schedule_sdk.testing import MemoryJobStore
from tests.support.waiting import HANG, wait_until


class _LaterOnly(MemoryJobStore):
    """Every claim finds nothing due and the next row due in an hour."""

    def claim_due_planned(self, now: datetime, limit: int, worker_id: str, lease_until: datetime) -> DueClaim:
        return DueClaim([], now + timedelta(hours=1), False)


class _Dispatcher:
    worker_id = "w"
    on_capacity: object = None

    def capacity(self) -> int:
        return 10

    def submit(self, jobs: object) -> None:
        raise AssertionError("nothing was claimed")


def test_a_stop_given_as_a_claim_starts_ends_the_sleep_that_claim_plans():
    """The stop lands after the loop looked at it and before the claim cleared the wake-up (the
    claim is held there): the claim's planned sleep, toward a row due in an hour, must end at once."""
    poller = DuePoller(
        store=_LaterOnly(),
        queue=SQLExecutionQueue(),
        dispatcher=_Dispatcher(),  # type: ignore[arg-type]
        clock=SystemClock(),
        poll_interval=3600.0,
    )
    entered, go = threading.Event(), threading.Event()
    cycle = poller._cycle

    def held_cycle() -> float:
        if not entered.is_set():
            entered.set()
            go.wait(HANG)
        return cycle()

    poller._cycle = held_cycle  # type: ignore[method-assign]
    poller.start()
    assert entered.wait(HANG)
    stopper = threading.Thread(target=poller.stop)
    stopper.start()
    assert wait_until(poller._wakeup.is_set)  # the stop was given (it now waits for the thread)
    go.set()
    stopper.join(HANG)
    assert not stopper.is_alive()
    thread = poller._thread
    assert thread is not None and not thread.is_alive(), "the poller slept on past its stop"
