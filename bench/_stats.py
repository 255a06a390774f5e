"""Helpers shared by the benchmark scripts (run them as ``python bench/<script>.py``)."""

from __future__ import annotations

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]
