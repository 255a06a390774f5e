"""``OtelTracing``: OpenTelemetry spans for fires (``pip install 'schedule-sdk[otel]'``).

At schedule time the caller's context is captured with the globally configured propagator (W3C
``traceparent`` and ``tracestate`` by default, and baggage) and stored with the job as JSON. At
fire time it is extracted again and a ``CONSUMER`` span, ``schedule.fire <topic>``, starts as the
root of a new trace with a *link* to the scheduling span (the convention for deferred work: a
request span that ended hours ago is not a parent), current while the listeners run, with the
stored baggage: a span a listener starts (a call to another service) is a child of the fire. A job
scheduled outside any trace fires in a new trace without a link.

Span attributes: ``schedule.job.id``, ``schedule.topic``, ``schedule.occurrence``,
``schedule.attempt``, ``schedule.lateness_s`` and ``schedule.outcome``; a listener's exception is
recorded on the span (status ``ERROR``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Link, SpanKind, Status, StatusCode, TracerProvider

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


class _NoSpan(FireSpan):
    def finish(self, outcome: str, error: BaseException | None) -> None:
        return None


_NO_SPAN = _NoSpan()
#: The whole of an unrecorded fire's span: reusable, entered by every such fire.
_NOTHING: AbstractContextManager[FireSpan] = contextlib.nullcontext(_NO_SPAN)
#: Whether a global tracer provider was seen (see :func:`_unconfigured`).
_configured = False


def _unconfigured() -> bool:
    """Whether the application has set no global tracer provider yet (spans would be no-ops).

    Asked once per fire, of the API (``get_tracer_provider()`` answers the proxy provider until
    one is set in code or named in the environment). A provider once set stays set for the
    process, so once one is seen the answer is kept and the API is not asked again."""
    global _configured
    if _configured:
        return False
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return True
    _configured = True
    return False


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
        self._global = tracer_provider is None

    def capture(self) -> str | None:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return json.dumps(carrier, separators=(",", ":"), sort_keys=True) if carrier else None

    def fire(self, job: ScheduledJob, lateness: float) -> AbstractContextManager[FireSpan]:
        if not job.trace_context and self._global and _unconfigured():
            # Nothing would be recorded and no stored context (baggage) to make current: the
            # span's set-up is skipped (its cost shows in a burst of fires).
            return _NOTHING
        return self._span(job, lateness)

    @contextlib.contextmanager
    def _span(self, job: ScheduledJob, lateness: float) -> Iterator[FireSpan]:
        attributes: dict[str, str | int | float] = {
            "schedule.job.id": job.id,
            "schedule.topic": job.topic,
            "schedule.occurrence": job.occurrence,
            "schedule.attempt": job.attempt,
            "schedule.lateness_s": lateness,
        }
        stored = restore(job.trace_context)
        scheduling = trace.get_current_span(stored).get_span_context()
        links = [Link(scheduling)] if scheduling.is_valid else []
        if job.notice is not None:  # a give-up's notice delivers its event: no fire of the topic
            attributes["schedule.notice"] = job.notice
        name = f"schedule.fire {job.topic}" if job.notice is None else f"schedule.{job.notice} {job.topic}"
        with self._tracer.start_as_current_span(
            name,
            context=trace.set_span_in_context(INVALID_SPAN, stored),  # its baggage, no parent
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
            record_exception=False,
            set_status_on_exception=True,
        ) as span:
            yield _Span(span)
