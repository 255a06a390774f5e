"""What an operator's overview shows, as plain values: fires and lateness per time bucket, the
workers seen, and the bounds every count and plot window keeps."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schedule_sdk.domain.history import LATENESS_BOUNDS, FireOutcome
from schedule_sdk.domain.status import JobStatus

#: Counts stop here (shown as "10,000+"): a count never reads more index entries than this.
COUNT_CAP = 10_000

#: Plot windows: minutes -> bucket length (a whole number of minutes).
WINDOWS: dict[int, timedelta] = {
    60: timedelta(minutes=1),
    360: timedelta(minutes=10),
    1440: timedelta(hours=1),
}


@dataclass(frozen=True, slots=True)
class Bucket:
    """One time bucket of the overview: fires (skips excluded), failures, lateness percentiles
    (upper bound of the lateness class holding the percentile, in ms; None without fires)."""

    start: datetime
    fires: int
    failures: int
    p50_ms: int | None
    p99_ms: int | None


@dataclass(frozen=True, slots=True)
class Overview:
    """The overview of a window: its buckets, the topics failing most, and the totals."""

    buckets: list[Bucket]
    failures_by_topic: list[tuple[str, int]]
    total_fires: int
    total_failures: int
    since: datetime
    until: datetime


@dataclass(frozen=True, slots=True)
class SeenWorker:
    """A worker as seen in the fire history and in the claims it holds now."""

    worker_id: str
    last_fire: datetime | None
    fires: int
    in_flight: int


def percentile_bound(counts: dict[int, int], total: int, q: float) -> int | None:
    """The upper bound (ms) of the lateness class holding the ``q`` percentile of ``total`` fires
    counted per class in ``counts``; None without fires."""
    if total == 0:
        return None
    rank, seen = q * total, 0
    for cls in sorted(counts):
        seen += counts[cls]
        if seen >= rank:
            return LATENESS_BOUNDS[min(cls, len(LATENESS_BOUNDS) - 1)]
    return LATENESS_BOUNDS[-1]


#: A search of the operator's jobs list reads at most this many candidate rows (newest first by
#: id, through the filters' indexes) when it filters by text or sorts by a column no
#: index orders: the search is bounded, not exhaustive, and says so.
SEARCH_WINDOW = 10_000
#: The longest search text accepted.
MAX_SEARCH_TEXT = 200
#: The orders of the operator's jobs list: newest first by creation (the id), by due time, by
#: last update.
JOB_SORTS = ("created", "due", "updated")


@dataclass(frozen=True, slots=True)
class JobSearch:
    """The operator's query of the jobs list: equality filters (each served by an index), an
    optional set of tenants the operator is scoped to (None: every tenant), a substring of the
    payload, the last error or the latest fire's error or traceback,
    an order (one of :data:`JOB_SORTS`, descending unless ``ascending``), a page size and the
    keyset position after which the page starts (the previous page's last sort value and id)."""

    statuses: frozenset[JobStatus] = frozenset()
    topic: str | None = None
    owner_id: str | None = None
    tenant_id: str | None = None
    tenants: frozenset[str] | None = None
    #: The jobs whose last attempt ended so (``ScheduledJob.last_outcome``); empty: any.
    outcomes: frozenset[FireOutcome] = frozenset()
    text: str | None = None
    sort: str = "created"
    ascending: bool = False
    limit: int = 50
    after: tuple[str, str] | None = None
