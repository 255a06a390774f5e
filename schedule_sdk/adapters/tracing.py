"""Tracing adapters for the :class:`~schedule_sdk.ports.Tracing` port: :class:`NoTracing` (nothing
is captured or recorded) and, with the ``otel`` extra, OpenTelemetry
(:class:`~schedule_sdk.adapters.otel.OtelTracing`).

:func:`tracing_for` picks one from the ``tracing`` setting; it imports OpenTelemetry only when
asked to use it, and ``auto`` falls back to :class:`NoTracing` when the package is not installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from schedule_sdk.domain.errors import InvalidSetting
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import FireSpan, Tracing


class _NoSpan(FireSpan):
    def finish(self, outcome: str, error: BaseException | None) -> None:
        pass


_NO_SPAN = _NoSpan()


class NoTracing(Tracing):
    """Captures nothing, records nothing."""

    def capture(self) -> str | None:
        return None

    @contextlib.contextmanager
    def fire(self, job: ScheduledJob, lateness: float) -> Iterator[FireSpan]:
        yield _NO_SPAN


def tracing_for(setting: str) -> Tracing:
    """The tracing adapter for the ``tracing`` setting: ``none``; ``otel`` (the ``otel`` extra
    must be installed); ``auto``: ``otel`` when OpenTelemetry is importable, else ``none``."""
    if setting == "none":
        return NoTracing()
    try:
        from schedule_sdk.adapters.otel import OtelTracing
    except ImportError as missing:
        if setting == "otel":
            raise InvalidSetting(
                f"tracing='otel' needs the otel extra (pip install 'schedule-sdk[otel]'): {missing}"
            ) from missing
        return NoTracing()
    return OtelTracing()
