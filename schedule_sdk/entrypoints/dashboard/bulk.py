"""A bulk action over everything a filter of the jobs list matches: the jobs it applies to are
walked in keyset pages of the newest first, each one steered on its own through the service (its
rules, its metrics and its transaction), never one transaction over the selection.

What the confirmation counted is bounded by the newest matching id it saw (jobs created after it
are not touched). A job is re-read just before it is steered: one that no longer matches (another
operator or a worker changed its state since its page was read) is skipped and counted, as are the
jobs the confirmation counted that no longer match when the action runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from schedule_sdk.domain.errors import JobFinished, JobNotFound, ScheduleError, ScheduleUnavailable
from schedule_sdk.domain.ids import ID_PATTERN
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.overview import COUNT_CAP, JobSearch
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.entrypoints.dashboard.views import timer_note
from schedule_sdk.ports import OperatorReads

#: One bulk action steers at most this many jobs (run it again for the rest).
MAX_BULK = COUNT_CAP
#: Jobs read per keyset page of the walk.
WALK_PAGE = 100
#: The result page lists at most this many skipped or refused jobs (it counts them all).
LISTED = 50


@dataclass
class BulkReport:
    """What a bulk action over a filter did: jobs steered, skipped because their state changed
    (while the action ran, or since the confirmation counted them), refused by the service."""

    expected: int | None
    done: int = 0
    walked: int = 0
    changed: int = 0
    refused: int = 0
    capped: bool = False
    notes: list[tuple[str, str, bool]] = field(default_factory=list)  # (job id, why, changed)

    @property
    def left_since(self) -> int:
        """Jobs the confirmation counted that no longer matched when the action ran."""
        return max(0, (self.expected or 0) - self.walked) if not self.capped else 0

    def note(self, job_id: str, why: str, changed: bool) -> None:
        if changed:
            self.changed += 1
        else:
            self.refused += 1
        if len(self.notes) < LISTED:
            self.notes.append((job_id, why, changed))


def applicable(search: JobSearch, applies: frozenset[JobStatus]) -> JobSearch | None:
    """The jobs of ``search``'s filters that an action applying to ``applies`` may steer, newest
    first from the start (None: its status filter leaves none)."""
    statuses = (search.statuses or frozenset(JobStatus)) & applies
    if not statuses:
        return None
    return replace(search, statuses=statuses, sort="created", ascending=False, after=None, limit=WALK_PAGE)


def newest_bound(reads: OperatorReads, search: JobSearch) -> str | None:
    """A bound just above the newest id ``search`` matches now (the walk starts below it), or
    None when it matches nothing."""
    newest = reads.search_jobs(replace(search, limit=1))
    if not newest:
        return None
    return str(uuid.UUID(int=min(uuid.UUID(newest[0].id).int + 1, (1 << 128) - 1)))


def bound_of(text: str | None) -> str | None:
    """The bound a confirmation form carried (None: none, or not an id)."""
    if text is None or not ID_PATTERN.fullmatch(text.strip()):
        return None
    return text.strip().lower()


def walk(
    reads: OperatorReads,
    search: JobSearch,
    bound: str | None,
    fresh: Callable[[str], ScheduledJob | None],
    steer: Callable[[ScheduledJob], object],
    expected: int | None,
) -> BulkReport:
    """Steer every job of ``search`` (an :func:`applicable` one) below ``bound``, a keyset page
    at a time, each re-read by ``fresh`` (None: gone or not visible) and skipped when its status
    left ``search``'s, else given to ``steer`` (the service's call; its refusal is noted).

    :raises ScheduleUnavailable: the store is unreachable (what was done stays done).
    """
    report = BulkReport(expected)
    after = None if bound is None else ("", bound)
    while True:
        page = reads.search_jobs(replace(search, after=after))
        for job in page:
            if report.walked >= MAX_BULK:
                report.capped = True
                return report
            report.walked += 1
            now = fresh(job.id)
            if now is None or now.status not in search.statuses:
                report.note(job.id, "gone" if now is None else f"now {now.status.value}", changed=True)
                continue
            note = timer_note(now)
            if note is not None:
                report.note(job.id, note, changed=False)
                continue
            try:
                steer(now)
            except ScheduleUnavailable:
                raise
            except (JobNotFound, JobFinished) as gone:
                report.note(job.id, f"{gone.code}: {gone.message}", changed=True)
            except ScheduleError as refused:
                report.note(job.id, f"{refused.code}: {refused.message}", changed=False)
            else:
                report.done += 1
        if len(page) < search.limit:
            return report
        after = ("", page[-1].id)
