"""Metrics adapters: in-memory counters (the default, and what tests read) and a Prometheus
exposition adapter (``pip install 'schedule-sdk[prometheus]'``).

Names are dotted (``timer.commands.received``); Prometheus gets them with dots as underscores,
counters with ``_total`` (``timer_commands_received_total``) and timings as histograms in seconds
(``timer_polling_duration_seconds``).
"""

from __future__ import annotations

import threading
from typing import Any

from ..timer.ports import Metrics

#: Every counter and timing the timer reports.
COUNTERS = (
    "timer.commands.received",  # ScheduleTimer commands taken in (valid or not)
    "timer.commands.rejected",  # refused: malformed, or refused by the store
    "timer.schedules.processed",  # timers Reached (DueTimeReached published, row marked)
    "schedule.jobs.fired",  # the core's fires of timer jobs (retries included)
    "schedule.jobs.retried",  # fires that were a retry of a failed attempt
)
TIMINGS = (
    "timer.polling.duration",  # one due timer: read, publish, mark Reached (seconds)
    "timer.lateness",  # reachedAt - dueAt (seconds)
)


class InMemoryMetrics(Metrics):
    """Counters and the count/sum/max of each timing, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.timings: dict[str, list[float]] = {name: [] for name in TIMINGS}

    def increment(self, name: str, value: int = 1) -> None:
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + value

    def observe(self, name: str, seconds: float) -> None:
        with self._lock:
            self.timings.setdefault(name, []).append(seconds)

    def count(self, name: str) -> int:
        with self._lock:
            return self.counters.get(name, 0)


class PrometheusMetrics(Metrics):
    """Prometheus counters and histograms on their own registry (or the one given)."""

    def __init__(self, registry: Any = None) -> None:
        import prometheus_client as prom

        self._prom = prom
        self.registry = registry if registry is not None else prom.CollectorRegistry()
        self._counters = {name: self._counter(name) for name in COUNTERS}
        self._histograms = {
            name: prom.Histogram(
                _prom_name(name) + "_seconds",
                f"{name} in seconds",
                registry=self.registry,
                buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            )
            for name in TIMINGS
        }
        self._lock = threading.Lock()

    def _counter(self, name: str) -> Any:
        return self._prom.Counter(_prom_name(name), name, registry=self.registry)

    def increment(self, name: str, value: int = 1) -> None:
        counter = self._counters.get(name)
        if counter is None:
            with self._lock:
                counter = self._counters.setdefault(name, self._counter(name))
        counter.inc(value)

    def observe(self, name: str, seconds: float) -> None:
        histogram = self._histograms.get(name)
        if histogram is not None:
            histogram.observe(seconds)

    def exposition(self) -> bytes:
        """The text exposition format (what ``/metrics`` serves)."""
        data: bytes = self._prom.generate_latest(self.registry)
        return data

    def serve(self, port: int, addr: str = "0.0.0.0") -> Any:
        """Serve ``/metrics`` on ``port`` from a daemon thread; returns the server."""
        return self._prom.start_http_server(port, addr=addr, registry=self.registry)


def _prom_name(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")
