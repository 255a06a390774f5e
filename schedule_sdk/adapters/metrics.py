"""Metrics adapters for the :class:`~schedule_sdk.ports.Metrics` port, shared by jobs and the timer:
no-op (the container's default), in-memory counters (what tests read) and Prometheus
(``pip install 'schedule-sdk[prometheus]'``).

Names are dotted (``schedule.jobs.fired``); Prometheus gets them with dots as underscores,
counters with ``_total`` (``schedule_jobs_fired_total``) and timings as histograms in seconds
(``schedule_fire_lateness_seconds``). Labels are bounded: ``topic`` and ``outcome``, and ``key``
on the concurrency gauges (the concurrency keys an app names).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from schedule_sdk.ports import KeyLoad, Metrics, TopicBacklog

#: Every counter: its label names and its help text (Prometheus ``# HELP``).
COUNTERS: dict[str, tuple[tuple[str, ...], str]] = {
    "schedule.jobs.scheduled": (("topic",), "Jobs created by schedule_at, schedule_repeat or reschedule."),
    "schedule.jobs.fired": (
        ("topic", "outcome"),
        "Fires whose listeners ran, by the state they left the job in: completed, next, retry or failed.",
    ),
    "schedule.jobs.failed": (("topic",), "Fires whose listeners raised, retried or not."),
    "schedule.jobs.retried": (("topic",), "Failed fires that will be retried by the job's retry policy."),
    "schedule.jobs.missed": (
        ("topic",),
        "Occurrences skipped or coalesced by a misfire policy, or not fired by an overlap policy.",
    ),
    "schedule.jobs.unheard": (
        ("topic",),
        "Fires no listener heard (no @on_event listener of the topic ran): check the listener modules.",
    ),
    "schedule.jobs.timed_out": (
        ("topic",),
        "Fires whose listeners ran past their time limit (outcome timeout).",
    ),
    "schedule.listeners.stuck": ((), "Listener threads left running past a fire's time limit."),
    "schedule.listeners.unstuck": ((), "Stuck listener threads that returned later (their result dropped)."),
    "schedule.jobs.cancelled": (("topic",), "cancel() calls that cancelled an open job."),
    "schedule.jobs.withdrawn": (
        ("topic",),
        "Fires claimed ahead of due whose row was cancelled, paused or rescheduled: no listener ran.",
    ),
    "schedule.jobs.requeued": (("topic",), "Finished jobs run again by requeue()."),
    "schedule.rq.entries.refused": (
        (),
        "RQ entries set aside unexecuted (undecodable, or not a fire of the queue): see its refused key.",
    ),
    "schedule.entries.healed": (
        (),
        (
            "Entries the reconciler handed to the substrate again because it had lost them (a flushed, "
            "emptied or failed-over Redis)."
        ),
    ),
    "timer.commands.received": ((), "ScheduleTimer commands taken in, valid or not."),
    "timer.commands.rejected": ((), "ScheduleTimer commands refused: malformed, or refused by the store."),
    "timer.schedules.processed": ((), "Timers reached: DueTimeReached published and the row marked."),
}
#: ``outcome`` of ``schedule.jobs.fired``: the state the fire leaves the job in.
OUTCOMES = ("completed", "next", "retry", "failed")
#: Every timing (seconds): its label names and its help text.
TIMINGS: dict[str, tuple[tuple[str, ...], str]] = {
    "schedule.fire.lateness": (
        ("topic",),
        "Seconds from a fire's due instant to the start of its listeners.",
    ),
    "schedule.listener.duration": (("topic", "outcome"), "Seconds all listeners of one fire ran."),
    "timer.polling.duration": ((), "Seconds to handle one due timer: read, publish, mark reached."),
    "timer.lateness": ((), "Seconds from a timer's due instant to its reachedAt."),
}
#: Gauges, computed when read (a scrape), never on the fire path: label names and help text.
GAUGES: dict[str, tuple[tuple[str, ...], str]] = {
    "schedule.jobs.pending": (("topic",), "Pending jobs."),
    "schedule.jobs.backlog": (("topic",), "Pending jobs already due and not yet fired."),
    "schedule.jobs.backlog.oldest": (
        ("topic",),
        "Seconds since the oldest due-but-not-fired job of the topic was due.",
    ),
}
#: The concurrency gauges (label ``key``: the keys an app names, a bounded set).
KEY_GAUGES: dict[str, tuple[tuple[str, ...], str]] = {
    "schedule.concurrency.running": (("key",), "Fires of the concurrency key running now (claimed)."),
    "schedule.concurrency.waiting": (("key",), "Fires of the concurrency key due and waiting for a slot."),
    "schedule.concurrency.limit": (("key",), "The highest limit the open jobs of the key name."),
}
#: Gauges of this process's clock (with :meth:`PrometheusMetrics.watch_clock`), read at a scrape.
CLOCK_GAUGES: dict[str, str] = {
    "schedule.worker.clock.offset": (
        "Seconds to add to this process's clock to read the store's, as last measured "
        "(the worker claims by the store's clock)."
    ),
    "schedule.worker.clock.error": "The error bound of that measurement (half its round trip), seconds.",
}
# Lateness reaches minutes to an hour in a catch-up after downtime; durations stay short.
_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600, 1800, 3600)

BacklogSource = Callable[[], tuple[datetime, list[TopicBacklog]]]
#: ``(offset, error)`` in seconds of this process's clock from the store's; None: not measured.
ClockSource = Callable[[], tuple[float, float] | None]


def backlog_gauges(now: datetime, backlog: list[TopicBacklog]) -> Iterator[tuple[str, dict[str, str], float]]:
    """The gauge readings ``(name, labels, value)`` of one backlog reading."""
    for entry in backlog:
        labels = {"topic": entry.topic}
        yield "schedule.jobs.pending", labels, float(entry.pending)
        yield "schedule.jobs.backlog", labels, float(entry.due)
        oldest = 0.0 if entry.oldest_due is None else max(0.0, (now - entry.oldest_due).total_seconds())
        yield "schedule.jobs.backlog.oldest", labels, oldest


KeySource = Callable[[], list[KeyLoad]]


def key_gauges(loads: list[KeyLoad]) -> Iterator[tuple[str, dict[str, str], float]]:
    """The gauge readings ``(name, labels, value)`` of one concurrency reading."""
    for load in loads:
        labels = {"key": load.key}
        yield "schedule.concurrency.running", labels, float(load.running)
        yield "schedule.concurrency.waiting", labels, float(load.waiting)
        yield "schedule.concurrency.limit", labels, float(load.limit)


class InMemoryMetrics(Metrics):
    """Counters and timings in dicts, thread-safe. ``count(name)`` sums over labels;
    ``count(name, topic=...)`` sums the series with those labels."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
        self.timings: dict[str, list[tuple[float, dict[str, str]]]] = {name: [] for name in TIMINGS}

    def increment(self, name: str, value: int = 1, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            self.counters[key] = self.counters.get(key, 0) + value

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        with self._lock:
            self.timings.setdefault(name, []).append((seconds, labels))

    def count(self, name: str, **labels: str) -> int:
        wanted = set(labels.items())
        with self._lock:
            return sum(v for (n, series), v in self.counters.items() if n == name and wanted <= set(series))

    def observed(self, name: str, **labels: str) -> list[float]:
        wanted = set(labels.items())
        with self._lock:
            return [s for s, got in self.timings.get(name, []) if wanted <= set(got.items())]


class PrometheusMetrics(Metrics):
    """Prometheus counters, histograms and (with :meth:`watch_backlog`) gauges, on their own
    registry (or the one given). Serve it with :meth:`serve`, or mount :meth:`wsgi_app` /
    :meth:`asgi_app` in an app, or expose :attr:`registry` yourself."""

    def __init__(self, registry: Any = None) -> None:
        import prometheus_client as prom

        self._prom = prom
        self.registry = registry if registry is not None else prom.CollectorRegistry()
        self._lock = threading.Lock()
        self._counters = {
            name: self._counter(name, labels, text) for name, (labels, text) in COUNTERS.items()
        }
        self._histograms = {
            name: prom.Histogram(
                _prom_name(name) + "_seconds",
                text,
                labels,
                registry=self.registry,
                buckets=_BUCKETS,
            )
            for name, (labels, text) in TIMINGS.items()
        }

    def _counter(self, name: str, labels: tuple[str, ...] = (), text: str | None = None) -> Any:
        return self._prom.Counter(
            _prom_name(name), text or f"Count of {name}.", labels, registry=self.registry
        )

    @staticmethod
    def _series(metric: Any, labels: dict[str, str]) -> Any:
        names = metric._labelnames
        if not names:
            return metric
        return metric.labels(*(labels.get(n, "") for n in names))

    def increment(self, name: str, value: int = 1, **labels: str) -> None:
        counter = self._counters.get(name)
        if counter is None:
            with self._lock:
                counter = self._counters.setdefault(name, self._counter(name))
        self._series(counter, labels).inc(value)

    def observe(self, name: str, seconds: float, **labels: str) -> None:
        histogram = self._histograms.get(name)
        if histogram is not None:
            self._series(histogram, labels).observe(seconds)

    def watch_backlog(self, source: BacklogSource) -> None:
        """Register the pending/backlog gauges, read from ``source()`` at each scrape (one store
        query per scrape); a failing read yields no gauge samples rather than a failed scrape."""
        self.registry.register(_BacklogCollector(self._prom, source))

    def watch_clock(self, source: ClockSource) -> None:
        """Register the clock gauges (:data:`CLOCK_GAUGES`), read from ``source()`` at each
        scrape (no I/O: the last measurement); none while nothing was measured."""
        self.registry.register(_ClockCollector(source))

    def watch_concurrency(self, source: KeySource) -> None:
        """Register the concurrency gauges (running, waiting and limit per key), read from
        ``source()`` at each scrape; a failing read yields no samples."""
        self.registry.register(_KeyCollector(source))

    def exposition(self) -> bytes:
        """The text exposition format (what ``/metrics`` serves)."""
        data: bytes = self._prom.generate_latest(self.registry)
        return data

    def serve(self, port: int, addr: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` on ``addr:port`` (default loopback) from a daemon thread; returns the
        server. The worker command serves probes too (``schedule_sdk.entrypoints.probes``)."""
        return self._prom.start_http_server(port, addr=addr, registry=self.registry)

    def wsgi_app(self) -> Any:
        """A WSGI app serving the exposition (mount it at ``/metrics`` in Flask or Django)."""
        return self._prom.make_wsgi_app(self.registry)

    def asgi_app(self) -> Any:
        """An ASGI app serving the exposition (``app.mount("/metrics", ...)`` in FastAPI)."""
        return self._prom.make_asgi_app(self.registry)


class _BacklogCollector:
    def __init__(self, prom: Any, source: BacklogSource) -> None:
        self._prom = prom
        self._source = source

    def describe(self) -> list[Any]:
        return []  # read at scrape time only (registering must not query the store)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        try:
            now, backlog = self._source()
        except Exception:  # the store is down: no samples (health reports it)
            return
        families = {
            name: GaugeMetricFamily(
                _prom_name(name) + ("_seconds" if name.endswith("oldest") else ""), text, labels=list(labels)
            )
            for name, (labels, text) in GAUGES.items()
        }
        for name, labels, value in backlog_gauges(now, backlog):
            families[name].add_metric([labels["topic"]], value)
        yield from families.values()


class _KeyCollector:
    def __init__(self, source: KeySource) -> None:
        self._source = source

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        try:
            loads = self._source()
        except Exception:  # the store is down: no samples (health reports it)
            return
        families = {
            name: GaugeMetricFamily(_prom_name(name), text, labels=list(labels))
            for name, (labels, text) in KEY_GAUGES.items()
        }
        for name, labels, value in key_gauges(loads):
            families[name].add_metric([labels["key"]], value)
        yield from families.values()


class _ClockCollector:
    def __init__(self, source: ClockSource) -> None:
        self._source = source

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        reading = self._source()
        if reading is None:
            return
        for (name, text), value in zip(CLOCK_GAUGES.items(), reading, strict=True):
            family = GaugeMetricFamily(_prom_name(name) + "_seconds", text)
            family.add_metric([], value)
            yield family


def _prom_name(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")
