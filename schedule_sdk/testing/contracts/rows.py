"""Rows for the job store contract suites, built directly (no service in between)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from schedule_sdk.domain.history import FireOutcome, FireRecord
from schedule_sdk.domain.ids import new_id
from schedule_sdk.domain.jobs import NO_RETRY, JobMetadata, ScheduledJob
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import FireHistory, JobStore, require

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


#: The job id of :func:`fire` unless told otherwise.
FIRED_JOB_ID = "01900000-0000-7000-8000-00000000000a"


def fire(seconds: float = 0, **changes: Any) -> FireRecord:
    """A fire history entry: a success due ``seconds`` after ``NOW``, fired late by ``lateness_ms=250``."""
    values: dict[str, Any] = {
        "job_id": FIRED_JOB_ID,
        "topic": "contract.test",
        "occurrence": 1,
        "attempt": 1,
        "due_at": at(seconds),
        "fired_at": at(seconds + 0.25),
        "lateness_ms": 250,
        "duration_ms": 12,
        "outcome": FireOutcome.SUCCEEDED,
        "error": None,
        "worker_id": "host:1:abcdefgh",
    }
    values.update(changes)
    return FireRecord(**values)


def record(store: JobStore, *fires: FireRecord) -> None:
    """Write ``fires`` to the history in one transaction."""
    history = require(store, FireHistory, "the fire history contract")
    with store.transaction() as tx:
        history.record_fires(tx, list(fires))
