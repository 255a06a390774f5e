"""The one polling wait of the suite: wait on a condition, never for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from schedule_sdk.errors import JobFinished, NotReschedulable, RunAtInPast

if TYPE_CHECKING:
    from schedule_sdk.domain.jobs import ScheduledJob

T = TypeVar("T")

#: How often a condition is checked again while it does not hold.
EVERY = 0.02
#: The default deadline of a wait: it only guards against a hang, so it is far longer than the
#: behaviour takes even on a loaded machine (a wait returns as soon as its condition holds).
HANG = 60.0


def wait_until(predicate: Callable[[], Any], timeout: float = HANG, every: float = EVERY) -> bool:
    """True as soon as ``predicate()`` holds; False if it still does not after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return bool(predicate())


def wait_for(check: Callable[[], T | None], what: str, timeout: float = HANG, every: float = EVERY) -> T:
    """The first truthy value of ``check()``.

    :raises AssertionError: none came within ``timeout`` seconds (naming ``what``).
    """
    found: list[T] = []

    def holds() -> bool:
        value = check()
        if value:
            found.append(value)
            return True
        return False

    if not wait_until(holds, timeout, every):
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")
    return found[0]


class TooLate(Exception):
    """Raised by a :func:`with_lead` attempt whose step meant to come before a due instant came
    after it (a loaded machine): the attempt is made again with a longer lead."""


@contextmanager
def before_due(*jobs: ScheduledJob) -> Iterator[None]:
    """Steps meant to end before the earliest due instant of ``jobs``: :class:`TooLate` when they
    ended after it, or were refused because a job finished (fired) meanwhile. A refusal before
    that instant is raised as it is: a fault, not the machine's speed."""
    due = min(job.run_at for job in jobs)
    try:
        yield
    except (JobFinished, NotReschedulable):
        if datetime.now(UTC) < due:
            raise
        raise TooLate from None
    if datetime.now(UTC) >= due:
        raise TooLate


def with_lead(attempt: Callable[[float], T], lead: float, attempts: int = 6) -> T:
    """``attempt(lead)``: a call that schedules something due ``lead`` seconds from now.

    The service refuses a ``run_at`` that has passed by the time the call reaches it, and writes
    nothing (``RunAtInPast``): on a loaded machine building and sending the call can take longer
    than a short lead. Then it is made again with twice the lead, so what is scheduled is always
    due a little after the service's own "now", never a guess of how long the call takes. An
    attempt that raises :class:`TooLate` (its own steps ran past what it scheduled) is made again
    the same way.
    """
    for _ in range(attempts):
        try:
            return attempt(lead)
        except (RunAtInPast, TooLate):
            lead *= 2
    return attempt(lead)
