"""Fire history: one :class:`FireRecord` per attempt a worker ran (or skipped) for a job."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class FireOutcome(StrEnum):
    """How one attempt ended, stored as these exact strings."""

    SUCCEEDED = "succeeded"  #: every listener returned
    FAILED = "failed"  #: a listener (or the publisher) raised; ``error`` says what
    SKIPPED = "skipped"  #: the job's misfire policy skipped this late occurrence; no listener ran


@dataclass(frozen=True, kw_only=True, slots=True)
class FireRecord:
    """One fire of a job, written in the transaction that records its outcome.

    ``(job_id, occurrence, attempt)`` names the fire; the same attempt appears twice only when
    it really ran twice (a worker lost its claim and another fired it again: at least once).
    Times are aware UTC.
    """

    job_id: str
    topic: str
    occurrence: int
    attempt: int
    #: When this attempt was due (``run_at`` when it was claimed: the retry's due time for a retry).
    due_at: datetime
    #: When the listeners started (for a skipped occurrence: when it was skipped).
    fired_at: datetime
    #: ``fired_at - due_at`` in whole milliseconds, rounded down (negative would be an early fire).
    lateness_ms: int
    #: How long the listeners ran, in whole milliseconds (0 when skipped).
    duration_ms: int
    outcome: FireOutcome
    #: ``"<ExceptionType>: <message>"`` for a failed attempt, else None.
    error: str | None
    #: The id of the worker that held the claim.
    worker_id: str | None
