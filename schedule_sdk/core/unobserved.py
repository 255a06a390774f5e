"""The core's defaults when no metrics or tracing adapter is given: :class:`NoMetrics` and
:class:`NoTracing` record nothing, at no cost on the fire path."""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager

from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import FireSpan, Metrics, Tracing


class NoMetrics(Metrics):
    """Records nothing (the default: no cost on the fire path)."""

    def increment(self, name: str, value: int = 1, **labels: str) -> None:
        return None

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        return None


class _NoSpan(FireSpan):
    def finish(self, outcome: str, error: BaseException | None) -> None:
        pass


_NO_SPAN = _NoSpan()
_NOTHING: AbstractContextManager[FireSpan] = contextlib.nullcontext(_NO_SPAN)


class NoTracing(Tracing):
    """Captures nothing, records nothing."""

    def capture(self) -> str | None:
        return None

    def fire(self, job: ScheduledJob, lateness: float) -> AbstractContextManager[FireSpan]:
        return _NOTHING
