"""A job as a ``schedule_jobs`` row and back, and a fire history entry from a ``schedule_fires`` row."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from schedule_sdk.adapters.sql.tables import schedule_fires as fires
from schedule_sdk.domain.calendars import Calendar
from schedule_sdk.domain.history import FireOutcome, FireRecord
from schedule_sdk.domain.jobs import (
    FIRE_ONCE,
    MUTABLE_FIELDS,
    ConcurrencyLimit,
    JobMetadata,
    MisfirePolicy,
    Repeat,
    RetryPolicy,
    ScheduledJob,
    encode_json,
    repeat_from_dict,
)
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.time_limits import limit_ms
from schedule_sdk.ports import Guard


def to_row(job: ScheduledJob) -> dict[str, Any]:
    """The column values for ``job``."""
    meta = job.metadata
    return {
        "id": job.id,
        "topic": job.topic,
        "status": job.status.value,
        "run_at": job.run_at,
        "scheduled_for": job.scheduled_for,
        "timezone": job.timezone,
        "payload": None if job.payload is None else encode_json(job.payload),
        "owner_id": meta.owner_id,
        "tenant_id": meta.tenant_id,
        "correlation_id": meta.correlation_id,
        "client_request_id": meta.client_request_id,
        "repeat": None if job.repeat is None else _policy_json(job.repeat),
        "retry": _policy_json(job.retry),
        "occurrence": job.occurrence,
        "attempt": job.attempt,
        "occurrence_count": job.occurrence_count,
        "repeat_limit": job.limit,
        "ends_at": job.ends_at,
        "last_fired_at": job.last_fired_at,
        "last_error": job.last_error,
        "claimed_by": job.claimed_by,
        "claimed_until": job.claimed_until,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "rescheduled_from": job.rescheduled_from,
        "rescheduled_to": job.rescheduled_to,
        "misfire": None if job.misfire == FIRE_ONCE else _policy_json(job.misfire),
        "regular_due": job.regular_due,
        "trace_context": job.trace_context,
        "concurrency_key": None if job.concurrency is None else job.concurrency.key,
        "concurrency_limit": None if job.concurrency is None else job.concurrency.limit,
        "overlap": job.overlap,
        "time_limit_ms": None if job.time_limit is None else limit_ms(job.time_limit),
        "spread_ms": job.spread_ms,
        "spread_offset_ms": job.spread_offset_ms or None,
        "jitter_ms": job.jitter_ms,
        "calendar": None if job.calendar is None else json.dumps(job.calendar.to_dict()),
        "run_of": job.run_of,
        "last_outcome": None if job.last_outcome is None else job.last_outcome.value,
        "notice": job.notice,
    }


@functools.lru_cache(maxsize=1024)
def _policy_json(policy: Repeat | RetryPolicy | MisfirePolicy) -> str:
    """The stored JSON of a (frozen, hashable) policy: most jobs share a few, so each is encoded once."""
    return json.dumps(policy.to_dict())


def from_row(row: Mapping[Any, Any]) -> ScheduledJob:
    """The job stored in ``row``."""
    return ScheduledJob(
        id=row["id"],
        topic=row["topic"],
        status=JobStatus(row["status"]),
        run_at=row["run_at"],
        scheduled_for=row["scheduled_for"],
        timezone=row["timezone"],
        payload=None if row["payload"] is None else json.loads(row["payload"]),
        metadata=_metadata(
            row["owner_id"], row["tenant_id"], row["correlation_id"], row["client_request_id"]
        ),
        repeat=None if row["repeat"] is None else _repeat(row["repeat"]),
        retry=_retry(row["retry"]),
        occurrence=row["occurrence"],
        attempt=row["attempt"],
        occurrence_count=row["occurrence_count"],
        limit=row["repeat_limit"],
        ends_at=row["ends_at"],
        last_fired_at=row["last_fired_at"],
        last_error=row["last_error"],
        claimed_by=row["claimed_by"],
        claimed_until=row["claimed_until"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        rescheduled_from=row["rescheduled_from"],
        rescheduled_to=row["rescheduled_to"],
        misfire=FIRE_ONCE if row["misfire"] is None else _misfire(row["misfire"]),
        regular_due=row["regular_due"],
        trace_context=row["trace_context"],
        concurrency=_concurrency(row["concurrency_key"], row["concurrency_limit"]),
        overlap=row["overlap"],
        time_limit=None if row["time_limit_ms"] is None else timedelta(milliseconds=row["time_limit_ms"]),
        spread_ms=row["spread_ms"],
        spread_offset_ms=row["spread_offset_ms"] or 0,
        jitter_ms=row["jitter_ms"],
        calendar=None if row["calendar"] is None else Calendar.from_dict(json.loads(row["calendar"])),
        run_of=row["run_of"],
        last_outcome=None if row["last_outcome"] is None else FireOutcome(row["last_outcome"]),
        notice=row["notice"],
    )


_NO_METADATA = JobMetadata()


def _metadata(
    owner_id: str | None, tenant_id: str | None, correlation_id: str | None, client_request_id: str | None
) -> JobMetadata:
    """A row's metadata (the many rows without any share one value)."""
    if owner_id is None and tenant_id is None and correlation_id is None and client_request_id is None:
        return _NO_METADATA
    return JobMetadata.stored(
        owner_id=owner_id,
        tenant_id=tenant_id,
        correlation_id=correlation_id,
        client_request_id=client_request_id,
    )


# The stored policies: most rows share a few (frozen values), so each text is parsed once.
@functools.lru_cache(maxsize=1024)
def _repeat(text: str) -> Repeat:
    return repeat_from_dict(json.loads(text))


@functools.lru_cache(maxsize=1024)
def _retry(text: str) -> RetryPolicy:
    return RetryPolicy.from_dict(json.loads(text))


@functools.lru_cache(maxsize=1024)
def _misfire(text: str) -> MisfirePolicy:
    return MisfirePolicy.from_dict(json.loads(text))


@functools.lru_cache(maxsize=1024)
def _concurrency(key: str | None, limit: int | None) -> ConcurrencyLimit | None:
    """The stored limit of a row (most rows share a few: each is built once)."""
    return None if key is None or limit is None else ConcurrencyLimit(key=key, limit=limit)


#: The columns of a fire history entry, in the order the driver-level writes bind them.
FIRE_FIELDS = tuple(c.name for c in fires.c if c.name != "id")


def fire_from_row(row: Mapping[Any, Any]) -> FireRecord:
    """The fire history entry stored in ``row``."""
    values = {name: row[name] for name in FIRE_FIELDS}
    values["outcome"] = FireOutcome(values["outcome"])
    return FireRecord(**values)


def update_params(job: ScheduledJob, guard: Guard) -> dict[str, Any]:
    row = to_row(job)
    params = {f"v_{name}": row[name] for name in MUTABLE_FIELDS}
    params.update(b_id=job.id, b_claimed_by=guard.claimed_by, b_occurrence=guard.occurrence)
    return params


def sorted_jobs(rows: Sequence[Mapping[Any, Any]]) -> list[ScheduledJob]:
    """The jobs of claimed ``rows``, in due order."""
    return sorted((from_row(r) for r in rows), key=lambda j: (j.run_at, j.id))
