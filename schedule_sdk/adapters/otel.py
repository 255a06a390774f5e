"""``OtelTracing``: OpenTelemetry spans for fires (``pip install 'schedule-sdk[otel]'``).

At schedule time the caller's context is captured with the globally configured propagator (W3C
``traceparent`` and ``tracestate`` by default, and baggage) and stored with the job as JSON. At
fire time it is extracted again and a ``CONSUMER`` span, ``schedule.fire <topic>``, starts as its
child, current while the listeners run: a span a listener starts (a call to another service) is a
child of the fire, so the request that scheduled the job, the fire hours later and what the
listener did are one trace. A job scheduled outside any trace fires in a new trace of its own.

Span attributes: ``schedule.job.id``, ``schedule.topic``, ``schedule.occurrence``,
``schedule.attempt``, ``schedule.lateness_s`` and ``schedule.outcome``; a listener's exception is
recorded on the span (status ``ERROR``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider

from schedule_sdk.domain.errors import ListenerFailed
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import FireSpan, Tracing

#: The instrumentation scope's name.
SCOPE = "schedule_sdk"


class _Span(FireSpan):
    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def finish(self, outcome: str, error: BaseException | None) -> None:
        self._span.set_attribute("schedule.outcome", outcome)
        if error is None:
            return
        causes = error.errors if isinstance(error, ListenerFailed) and error.errors else [error]
        for cause in causes:
            self._span.record_exception(cause)
        self._span.set_status(Status(StatusCode.ERROR, str(error)))


def restore(stored: str | None) -> Context:
    """The context stored with a job (an empty one, a new trace, for None or unreadable text)."""
    if not stored:
        return Context()
    try:
        carrier = json.loads(stored)
    except ValueError:
        return Context()
    if not isinstance(carrier, dict):
        return Context()
    return propagate.extract({str(k): str(v) for k, v in carrier.items()}, context=Context())


class OtelTracing(Tracing):
    """Fire spans through ``tracer_provider`` (default: the global one, so nothing is recorded
    until the application configures OpenTelemetry)."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)

    def capture(self) -> str | None:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return json.dumps(carrier, separators=(",", ":"), sort_keys=True) if carrier else None

    @contextlib.contextmanager
    def fire(self, job: ScheduledJob, lateness: float) -> Iterator[FireSpan]:
        attributes: dict[str, str | int | float] = {
            "schedule.job.id": job.id,
            "schedule.topic": job.topic,
            "schedule.occurrence": job.occurrence,
            "schedule.attempt": job.attempt,
            "schedule.lateness_s": lateness,
        }
        with self._tracer.start_as_current_span(
            f"schedule.fire {job.topic}",
            context=restore(job.trace_context),
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=True,
        ) as span:
            yield _Span(span)
