"""The Prometheus histograms' buckets reach an hour: a catch-up after minutes of downtime lands in
a bucket of its own, not only in ``+Inf``."""

from __future__ import annotations

from prometheus_client import generate_latest

from schedule_sdk.adapters.metrics import PrometheusMetrics


def _bucket(text: str, le: str) -> float:
    line = next(
        line
        for line in text.splitlines()
        if line.startswith("schedule_fire_lateness_seconds_bucket{") and f'le="{le}"' in line
    )
    return float(line.rsplit(" ", 1)[1])


def test_a_fire_late_by_minutes_lands_below_an_hour() -> None:
    metrics = PrometheusMetrics()
    metrics.observe("schedule.fire.lateness", 20 * 60, topic="t")
    text = generate_latest(metrics.registry).decode()
    assert _bucket(text, "300.0") == 0
    assert _bucket(text, "1800.0") == 1 and _bucket(text, "3600.0") == 1
