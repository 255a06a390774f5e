"""OpenTelemetry (the ``otel`` extra): a job scheduled inside a trace fires in a span of that trace,
and what its listener does is part of the same trace; spans are read back from the SDK's
in-memory exporter, not from the code under test."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dependency_injector import providers
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, ListenerRegistry, OneShotSpec, RetryPolicy
from schedule_sdk.adapters.otel import OtelTracing
from schedule_sdk.bootstrap.settings import Settings
from schedule_sdk.bootstrap.tracing import tracing_for
from schedule_sdk.core.firing import Firing
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.core.unobserved import NoTracing
from schedule_sdk.domain.errors import InvalidSetting
from schedule_sdk.testing import (
    FakeClock,
    InlineExecutionQueue,
    InlineRunner,
    MemoryJobStore,
    RecordingPublisher,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def by_name(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _kit(registry: ListenerRegistry, tracing: OtelTracing):
    clock, store, queue = FakeClock(), MemoryJobStore(), InlineExecutionQueue()
    firing = Firing(
        store=store, queue=queue, publisher=RecordingPublisher(registry), clock=clock, tracing=tracing
    )
    service = ScheduleService(store=store, queue=queue, clock=clock, tracing=tracing)
    return clock, service, InlineRunner(store=store, queue=queue, firing=firing, clock=clock)


def _call_service_y(tracer: trace.Tracer):
    def listener(event):
        with tracer.start_as_current_span("call service Y"):
            pass

    return listener


def linked_to(span, parent) -> bool:
    """``span`` is a root linked to ``parent`` (deferred work: a link, not a child)."""
    context = parent.get_span_context()
    return span.parent is None and [(link.context.trace_id, link.context.span_id) for link in span.links] == [
        (context.trace_id, context.span_id)
    ]


def test_a_fire_later_is_linked_to_the_request_that_scheduled_it_and_parents_the_listeners_call(
    provider, exporter
):
    tracer = provider.get_tracer("app")
    registry = ListenerRegistry()
    registry.connect(SCHEDULE_ARRIVED_EVENT, _call_service_y(tracer))
    clock, service, runner = _kit(registry, OtelTracing(tracer_provider=provider))
    with tracer.start_as_current_span("request X") as request:
        job = service.schedule_at(
            OneShotSpec(topic="remind", run_at=clock.now() + timedelta(hours=3), timezone="UTC")
        )
    assert job.trace_context is not None and "traceparent" in job.trace_context
    clock.advance(timedelta(hours=3, seconds=2))
    runner.run_due()  # outside any span: the context comes from the stored job
    [fire] = by_name(exporter, "schedule.fire remind")
    [call] = by_name(exporter, "call service Y")
    assert fire.context.trace_id == call.context.trace_id != request.get_span_context().trace_id
    assert linked_to(fire, request)
    assert call.parent is not None and call.parent.span_id == fire.context.span_id
    assert fire.kind is SpanKind.CONSUMER
    assert dict(fire.attributes or {}) == {
        "schedule.job.id": job.id,
        "schedule.topic": "remind",
        "schedule.occurrence": 1,
        "schedule.attempt": 1,
        "schedule.lateness_s": 2.0,
        "schedule.outcome": "completed",
    }
    assert fire.status.status_code is StatusCode.UNSET


def test_a_failing_listener_is_recorded_on_the_fire_span_and_each_attempt_has_one(provider, exporter):
    registry = ListenerRegistry()

    def broken(event):
        raise ConnectionError("service Y is down")

    registry.connect(SCHEDULE_ARRIVED_EVENT, broken)
    clock, service, runner = _kit(registry, OtelTracing(tracer_provider=provider))
    with provider.get_tracer("app").start_as_current_span("request X") as request:
        spec = OneShotSpec(topic="remind", run_at=clock.now(), timezone="UTC", retry=RetryPolicy(attempts=2))
        service.schedule_at(spec)
    runner.run_due()
    clock.advance(5)
    runner.run_due()
    first, second = by_name(exporter, "schedule.fire remind")
    assert [s.attributes["schedule.attempt"] for s in (first, second)] == [1, 2]  # type: ignore[index]
    assert [s.attributes["schedule.outcome"] for s in (first, second)] == ["retry", "failed"]  # type: ignore[index]
    for span in (first, second):
        assert linked_to(span, request)
        assert span.status.status_code is StatusCode.ERROR
        [exception] = [e for e in span.events if e.name == "exception"]
        assert exception.attributes["exception.type"] == "ConnectionError"  # type: ignore[index]
        assert exception.attributes["exception.message"] == "service Y is down"  # type: ignore[index]


def test_a_job_scheduled_outside_any_trace_fires_in_a_new_trace(provider, exporter):
    clock, service, runner = _kit(ListenerRegistry(), OtelTracing(tracer_provider=provider))
    job = service.schedule_at(OneShotSpec(topic="remind", run_at=clock.now(), timezone="UTC"))
    assert job.trace_context is None
    with provider.get_tracer("app").start_as_current_span("the worker's own span"):
        runner.run_due()  # whatever is current in the worker, the fire is not its child
    [fire] = by_name(exporter, "schedule.fire remind")
    assert fire.parent is None and list(fire.links) == []


@pytest.mark.every_backend
def test_every_backend_keeps_the_trace_across_the_wait(backend, provider, exporter):
    h = backend.harness()
    h.container.tracing.override(providers.Object(OtelTracing(tracer_provider=provider)))
    tracer = provider.get_tracer("app")
    h.listen(SCHEDULE_ARRIVED_EVENT, _call_service_y(tracer))
    h.start()
    with tracer.start_as_current_span("request X") as request:
        run_at = datetime.now(UTC) + timedelta(seconds=0.5)
        job = h.service.schedule_at(OneShotSpec(topic="remind", run_at=run_at, timezone="UTC"))
    assert h.job(job.id).trace_context == job.trace_context  # stored with the row
    h.wait_status(job.id, "completed")
    assert h.wait_for(lambda: len(by_name(exporter, "schedule.fire remind")) == 1)
    [fire] = by_name(exporter, "schedule.fire remind")
    [call] = by_name(exporter, "call service Y")
    assert linked_to(fire, request)
    assert call.parent is not None and call.parent.span_id == fire.context.span_id
    assert call.context.trace_id == fire.context.trace_id
    assert fire.attributes["schedule.outcome"] == "completed"  # type: ignore[index]
    assert fire.attributes["schedule.lateness_s"] >= 0  # type: ignore[index,operator]


def test_the_tracing_setting_picks_the_adapter():
    assert isinstance(tracing_for("auto"), OtelTracing)
    assert isinstance(tracing_for("otel"), OtelTracing)
    assert isinstance(tracing_for("none"), NoTracing)


# Without the extra: OpenTelemetry unimportable (as in examples/test_quickstart.py), a job is
# scheduled and fired with the default settings; nothing imports it, and tracing='otel' is a typed
# error.
_WITHOUT_OTEL = """
import importlib.abc, sys
from datetime import timedelta
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")
        return None
sys.meta_path.insert(0, Hide())
from schedule_sdk import OneShotSpec, ScheduleContainer, SCHEDULE_ARRIVED_EVENT
from schedule_sdk.bootstrap.tracing import tracing_for
from schedule_sdk.core.unobserved import NoTracing
from schedule_sdk.domain.errors import InvalidSetting
container = ScheduleContainer()
container.config.from_dict({"database_url": "sqlite:///" + sys.argv[1], "auto_migrate": True})
assert isinstance(container.tracing(), NoTracing)
fired = []
container.listeners().connect(SCHEDULE_ARRIVED_EVENT, fired.append)
service = container.schedule_service()
soon = container.clock().now() + timedelta(seconds=1)
job = service.schedule_at(OneShotSpec(topic="t", run_at=soon, timezone="UTC"))
assert job.trace_context is None
with container.worker():
    import time
    deadline = time.monotonic() + 20
    while not fired and time.monotonic() < deadline:
        time.sleep(0.02)
assert len(fired) == 1, fired
try:
    tracing_for("otel")
except InvalidSetting as error:
    print("refused:", error.code)
print("imported:", sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def test_without_the_extra_nothing_changes_and_nothing_is_imported(tmp_path):
    command = [sys.executable, "-c", _WITHOUT_OTEL, str(tmp_path / "jobs.db")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == ["refused: SCHEDULE_INVALID_SETTING", "imported: []"]


def test_an_unknown_tracing_setting_is_refused_with_a_typed_error():
    with pytest.raises(InvalidSetting, match="tracing must be 'auto', 'otel' or 'none'"):
        Settings.load({"tracing": "traces"})


# The global provider is set once per process: each case runs in a process of its own. A fire of
# a job with no stored context records a span only once a global provider exists, whether the
# application sets it after the tracing object was made or names it in the environment.
_GLOBAL = """
import sys
from datetime import UTC, datetime
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from schedule_sdk import OneShotSpec
from schedule_sdk.adapters.otel import OtelTracing
from schedule_sdk.domain.jobs import ScheduledJob

now = datetime.now(UTC)
job = ScheduledJob.first_of(OneShotSpec(topic="t", run_at=now, timezone="UTC"), "j1", now)
tracing = OtelTracing()

def recording():
    with tracing.fire(job, 0.0) as span:
        return type(trace.get_current_span()).__name__, type(span).__name__

print(recording())
if sys.argv[1] == "set":
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    print(recording())
    print([s.name for s in exporter.get_finished_spans()])
"""


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("set", ["('NonRecordingSpan', '_NoSpan')", "('_Span', '_Span')", "['schedule.fire t']"]),
        ("env", ["('_Span', '_Span')"]),
    ],
)
def test_a_global_provider_set_later_or_named_in_the_environment_records_fire_spans(how, expected):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if how == "env":
        env["OTEL_PYTHON_TRACER_PROVIDER"] = "sdk_tracer_provider"
    command = [sys.executable, "-c", _GLOBAL, how]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == expected
