"""What the core reports to operators: metrics and tracing spans."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager

from schedule_sdk.domain.jobs import ScheduledJob


class Metrics(ABC):
    """Counters and timings of jobs and of the timer, with dotted names (``schedule.jobs.fired``,
    ``timer.commands.received``; the full list is in :mod:`schedule_sdk.adapters.metrics`).

    ``labels`` take bounded values only (a topic, an outcome), never a job id. Implementations
    are called on the fire path: they must not block or do I/O.
    """

    @abstractmethod
    def increment(self, name: str, value: int = 1, **labels: str) -> None:
        """Add ``value`` to counter ``name``."""

    @abstractmethod
    def observe(self, name: str, seconds: float, **labels: str) -> None:
        """Record one timing of ``name``, in seconds."""


class FireSpan(ABC):
    """The span of one fire, open while its listeners run."""

    @abstractmethod
    def finish(self, outcome: str, error: BaseException | None) -> None:
        """Record what the fire led to (``completed``, ``next``, ``retry``, ``failed`` or
        ``skipped``) and the listener's error, if any, before the span ends."""


class Tracing(ABC):
    """Trace context across the wait: captured with a job when it is scheduled, restored around
    each of its fires. Implementations are called on the schedule and fire paths: no I/O."""

    @abstractmethod
    def capture(self) -> str | None:
        """The caller's current trace context as text to store with a new job (None: none)."""

    @abstractmethod
    def fire(self, job: ScheduledJob, lateness: float) -> AbstractContextManager[FireSpan]:
        """A span around one fire of ``job`` (``lateness`` seconds after its due instant), in the
        trace stored with the job, current while the listeners run."""
