"""Rows for the job store contract suites, built directly (no service in between)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ...domain.ids import new_id
from ...domain.jobs import NO_RETRY, JobMetadata, ScheduledJob
from ...domain.status import JobStatus
from ...ports import JobStore

#: A fixed "now" with microseconds, so truncation by a backend would show.
NOW = datetime(2030, 3, 30, 12, 0, 0, 123456, tzinfo=UTC)


def job(**changes: Any) -> ScheduledJob:
    """A pending one-shot job due at ``NOW`` unless ``changes`` say otherwise."""
    run_at = changes.pop("run_at", NOW)
    values: dict[str, Any] = {
        "id": new_id(),
        "topic": "contract.test",
        "status": JobStatus.PENDING,
        "run_at": run_at,
        "scheduled_for": run_at,
        "timezone": "UTC",
        "payload": None,
        "metadata": JobMetadata(),
        "repeat": None,
        "retry": NO_RETRY,
        "created_at": NOW - timedelta(hours=1),
        "updated_at": NOW - timedelta(hours=1),
    }
    values.update(changes)
    return ScheduledJob(**values)


def insert(store: JobStore, *jobs: ScheduledJob) -> list[ScheduledJob]:
    with store.transaction() as tx:
        for j in jobs:
            tx.insert(j)
    return list(jobs)


def ids(jobs: list[ScheduledJob]) -> list[str]:
    return [j.id for j in jobs]


def at(seconds: float) -> datetime:
    """``NOW`` shifted by ``seconds``."""
    return NOW + timedelta(seconds=seconds)
