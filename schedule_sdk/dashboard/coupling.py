"""Where the dashboard meets features that other changes bring: the schedule preview with DST
marks and the worker registry. Each is one function with a fallback, so wiring the real feature
is an edit of this module only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from croniter import croniter

from ..domain import timing
from ..domain.jobs import CronRepeat, IntervalRepeat, ScheduledJob
from ..domain.status import OPEN_STATUSES
from ..ports import JobStore
from ..service import ScheduleService
from .reads import DashboardReads


@dataclass(frozen=True, slots=True)
class PreviewFire:
    """One upcoming fire: the instant (UTC), its wall time in the job's zone, and whether a DST
    change moved it (a fixed-time entry in a skipped hour fires at the transition) or merged it
    (a fixed-time entry in a repeated hour fires once, in the first pass)."""

    at: datetime
    local: datetime
    moved: bool = False
    merged: bool = False


def next_fires(service: ScheduleService, job: ScheduledJob, n: int = 5) -> list[PreviewFire]:
    """The next ``n`` fires of an open repeating job (empty for one-shots and finished jobs)."""
    if job.repeat is None or job.status not in OPEN_STATUSES:
        return []
    preview = getattr(service, "preview", None)  # ScheduleService.preview, when present
    if preview is not None:
        return [_adapt(item, job) for item in preview(job.id, n)][:n]
    return _computed(job, n)


def _adapt(item: Any, job: ScheduledJob) -> PreviewFire:
    at = getattr(item, "at", None) or getattr(item, "instant", None) or getattr(item, "utc", None) or item
    local = getattr(item, "local", None) or at.astimezone(timing.zone(job.zone_for_repeat))
    return PreviewFire(at, local, bool(getattr(item, "moved", False)), bool(getattr(item, "merged", False)))


def _computed(job: ScheduledJob, n: int) -> list[PreviewFire]:
    zone = timing.zone(job.zone_for_repeat)
    instants = [job.scheduled_for]
    repeat = job.repeat
    while len(instants) < n:
        last = instants[-1]
        if job.ends_at is not None and last >= job.ends_at:
            break
        if isinstance(repeat, IntervalRepeat):
            instants.append(last + timedelta(milliseconds=repeat.every_ms))
        elif isinstance(repeat, CronRepeat):
            instants.append(timing.next_cron_time(repeat.expression, zone, last))
    if job.ends_at is not None:
        instants = [i for i in instants if i <= job.ends_at]
    if isinstance(repeat, CronRepeat):
        return [_marked(repeat.expression, at, at.astimezone(zone)) for at in instants]
    return [PreviewFire(at, at.astimezone(zone)) for at in instants]


def _marked(expression: str, at: datetime, local: datetime) -> PreviewFire:
    wall = local.replace(tzinfo=None)
    try:
        moved = not croniter.match(expression, wall)
    except Exception:  # an expression croniter.match cannot read: no mark rather than a wrong one
        moved = False
    ambiguous = local.replace(fold=0).utcoffset() != local.replace(fold=1).utcoffset()
    merged = ambiguous and not timing.is_wildcard_cron(expression)
    return PreviewFire(at, local, moved, merged)


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A row of the workers page (fields the registry does not know are None)."""

    worker_id: str
    host: str | None
    pid: int | None
    substrate: str | None
    started_at: datetime | None
    last_beat: datetime | None
    in_flight: int
    last_fire: datetime | None


def workers(store: JobStore, reads: DashboardReads, now: datetime) -> tuple[list[WorkerView], bool]:
    """The workers to show, and whether they come from a live registry (False: seen in the fire
    history of the last hour and in the claims held now)."""
    registry = getattr(store, "list_workers", None)  # the worker registry, when present
    if registry is not None:
        return [_worker(w) for w in registry()], True
    seen = reads.workers_seen(now)
    views = [WorkerView(w.worker_id, None, None, None, None, None, w.in_flight, w.last_fire) for w in seen]
    return views, False


def _worker(w: Any) -> WorkerView:
    def field(*names: str) -> Any:
        return next((getattr(w, name) for name in names if getattr(w, name, None) is not None), None)

    return WorkerView(
        worker_id=str(field("worker_id", "id")),
        host=field("host", "hostname"),
        pid=field("pid"),
        substrate=field("substrate"),
        started_at=field("started_at", "started"),
        last_beat=field("last_beat", "last_beat_at", "heartbeat_at"),
        in_flight=int(field("in_flight", "fires_in_flight") or 0),
        last_fire=field("last_fire", "last_fired_at"),
    )


__all__: Sequence[str] = ("PreviewFire", "WorkerView", "next_fires", "workers")
