"""Metrics adapters for the :class:`~schedule_sdk.ports.Metrics` port, shared by jobs and the timer:
no-op (the container's default), in-memory counters (what tests read) and Prometheus
(``pip install 'schedule-sdk[prometheus]'``).

Names are dotted (``schedule.jobs.fired``); Prometheus gets them with dots as underscores,
counters with ``_total`` (``schedule_jobs_fired_total``) and timings as histograms in seconds
(``schedule_fire_lateness_seconds``). Labels are bounded: ``topic`` and ``outcome`` only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from schedule_sdk.ports import Metrics, TopicBacklog

#: Every counter: its label names and its help text (Prometheus ``# HELP``).
COUNTERS: dict[str, tuple[tuple[str, ...], str]] = {
    "schedule.jobs.scheduled": (("topic",), "Jobs created by schedule_at, schedule_repeat or reschedule."),
    "schedule.jobs.fired": (
        ("topic", "outcome"),
        "Fires whose listeners ran, by the state they left the job in: completed, next, retry or failed.",
    ),
    "schedule.jobs.failed": (("topic",), "Fires whose listeners raised, retried or not."),
    "schedule.jobs.retried": (("topic",), "Failed fires that will be retried by the job's retry policy."),
    "schedule.jobs.missed": (("topic",), "Occurrences skipped or coalesced by a misfire policy."),
    "schedule.jobs.unheard": (
        ("topic",),
        "Fires no listener heard (no @on_event listener of the topic ran): check the listener modules.",
    ),
    "schedule.jobs.cancelled": (("topic",), "cancel() calls that cancelled an open job."),
    "schedule.jobs.requeued": (("topic",), "Finished jobs run again by requeue()."),
    "schedule.rq.entries.refused": (
        (),
        "RQ entries set aside unexecuted (undecodable, or not a fire of the queue): see its refused key.",
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
_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)

BacklogSource = Callable[[], tuple[datetime, list[TopicBacklog]]]


def backlog_gauges(now: datetime, backlog: list[TopicBacklog]) -> Iterator[tuple[str, dict[str, str], float]]:
    """The gauge readings ``(name, labels, value)`` of one backlog reading."""
    for entry in backlog:
        labels = {"topic": entry.topic}
        yield "schedule.jobs.pending", labels, float(entry.pending)
        yield "schedule.jobs.backlog", labels, float(entry.due)
        oldest = 0.0 if entry.oldest_due is None else max(0.0, (now - entry.oldest_due).total_seconds())
        yield "schedule.jobs.backlog.oldest", labels, oldest


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


def _prom_name(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")
