"""The dashboard's view of the schedule preview (``ScheduleService.preview``, with DST marks) and
of the worker registry (``WorkerRegistry.workers``), joined with what the fire history shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from schedule_sdk.core.liveness import is_dead
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.domain.errors import ScheduleValidationError
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.status import OPEN_STATUSES
from schedule_sdk.domain.timing import FireTime
from schedule_sdk.ports import DeclaredRows, OperatorReads, WorkerRegistry


@dataclass(frozen=True, slots=True)
class PreviewFire:
    """One upcoming fire: the instant (UTC), its wall time in the job's zone, and whether a DST
    change moved it (a fixed-time entry in a skipped hour fires at the transition), merged it
    (several wall times of a skipped hour fire once) or repeated it (a wildcard entry's second
    pass through a repeated hour)."""

    at: datetime
    local: datetime
    moved: bool = False
    merged: bool = False
    repeated: bool = False
    #: The nominal occurrence when a spread (or a drawn jitter) delays the fire, else None.
    nominal: datetime | None = None
    #: The calendar excludes its date: it will not fire (reported missed).
    excluded: bool = False

    @classmethod
    def of(cls, fire: FireTime) -> PreviewFire:
        mark = fire.mark
        return cls(
            fire.at,
            fire.local,
            mark == "moved",
            mark == "merged",
            mark == "repeated",
            fire.nominal,
            fire.excluded,
        )


def next_fires(service: ScheduleService, job: ScheduledJob, n: int = 5) -> list[PreviewFire]:
    """The next ``n`` fires of an open repeating job (empty for one-shots and finished jobs, and
    where the next fires fall outside the calendar, past the year 9999)."""
    if job.repeat is None or job.status not in OPEN_STATUSES:
        return []
    try:
        return [PreviewFire.of(fire) for fire in service.preview(job.id, n)]
    except (OverflowError, ScheduleValidationError):
        return []


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A row of the workers page (fields the registry does not know are None; ``alive``: its
    heartbeat is recent, None when it is not in the registry)."""

    worker_id: str
    host: str | None
    pid: int | None
    substrate: str | None
    started_at: datetime | None
    last_beat: datetime | None
    in_flight: int
    last_fire: datetime | None
    alive: bool | None = None
    #: Seconds to add to the worker's clock to read the store's, and the measurement's error bound
    #: (at its last beat; None: not measured).
    clock_offset: float | None = None
    clock_error: float | None = None


def workers(
    store: WorkerRegistry, reads: OperatorReads, now: datetime, dead_after: float = 10.0
) -> tuple[list[WorkerView], bool]:
    """The workers to show, and whether they come from the worker registry (False: no worker is
    registered now, none is running; then the workers seen in the fire history of the last hour
    and in the claims held now)."""
    seen = {w.worker_id: w for w in reads.workers_seen(now)}
    registered = store.workers()
    if registered:
        views = [
            WorkerView(
                w.id,
                w.host,
                w.pid,
                w.substrate,
                w.started_at,
                w.last_beat,
                w.in_flight,
                seen[w.id].last_fire if w.id in seen else None,
                not is_dead(w, now, dead_after),
                w.clock_offset,
                w.clock_error,
            )
            for w in registered
        ]
        return views, True
    views = [
        WorkerView(w.worker_id, None, None, None, None, None, w.in_flight, w.last_fire) for w in seen.values()
    ]
    return views, False


__all__: Sequence[str] = ("PreviewFire", "WorkerView", "next_fires", "workers")


def declared_names(declared: DeclaredRows) -> dict[str, str]:
    """The job id of each schedule declared in code (still declared) -> its declared name."""
    return {row.job_id: row.name for row, _ in declared.read() if row.declared}
