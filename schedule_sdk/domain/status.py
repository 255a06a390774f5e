"""Job statuses, stored as these exact strings, and the moves allowed between them."""

from __future__ import annotations

from enum import StrEnum

from schedule_sdk.domain.errors import InvalidStatus, InvalidTransition
from schedule_sdk.domain.quoting import shown


class JobStatus(StrEnum):
    PENDING = "pending"  #: waiting for its next due time (one-shot or repeating)
    ACTIVE = "active"  #: a fire is in progress: a worker holds the claim and listeners run
    COMPLETED = "completed"  #: a one-shot fired successfully, or a repeating job reached its end
    CANCELLED = "cancelled"  #: cancelled, or replaced by ``reschedule``
    FAILED = "failed"  #: a one-shot exhausted its retry attempts
    PAUSED = "paused"  #: held by ``pause``: never fires until ``resume``


def parse_status(value: JobStatus | str) -> JobStatus:
    """The status named ``value``.

    :raises InvalidStatus: it names none (the message lists the statuses)."""
    try:
        return JobStatus(value)
    except ValueError:
        known = ", ".join(status.value for status in JobStatus)
        hint = ""
        if value in ("succeeded", "unheard", "timeout", "skipped"):  # FireOutcome's own names
            hint = f" ({value} is how a job's last attempt ended: filter by its outcome instead)"
        raise InvalidStatus(f"no job status {shown(value)}: one of {known}{hint}") from None


#: Statuses in which a job can still fire (a paused job once it is resumed).
OPEN_STATUSES: frozenset[JobStatus] = frozenset({JobStatus.PENDING, JobStatus.ACTIVE, JobStatus.PAUSED})
#: Statuses a job never leaves; only these rows are ever purged by retention.
FINISHED_STATUSES: frozenset[JobStatus] = frozenset(
    {JobStatus.COMPLETED, JobStatus.CANCELLED, JobStatus.FAILED}
)

ALLOWED: dict[JobStatus, frozenset[JobStatus]] = {
    # pending -> active: claimed for a fire; pending -> cancelled: cancel/reschedule.
    JobStatus.PENDING: frozenset({JobStatus.ACTIVE, JobStatus.CANCELLED, JobStatus.PAUSED}),
    # active -> pending: next occurrence, a retry, or a released claim; active -> paused: pause
    # mid-fire (the fire's outcome is then dropped, see ScheduleService.pause).
    JobStatus.ACTIVE: frozenset(
        {JobStatus.PENDING, JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.PAUSED}
    ),
    # paused -> pending: resume; paused -> cancelled: cancel/reschedule.
    JobStatus.PAUSED: frozenset({JobStatus.PENDING, JobStatus.CANCELLED}),
    JobStatus.COMPLETED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
    JobStatus.FAILED: frozenset(),
}


def check_transition(old: JobStatus, new: JobStatus) -> None:
    """Raise :class:`InvalidTransition` unless ``old -> new`` is allowed."""
    if new not in ALLOWED[old]:
        raise InvalidTransition(f"a job cannot move from {old} to {new}")
