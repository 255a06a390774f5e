"""Fire history: one :class:`FireRecord` per attempt a worker ran (or skipped) for a job."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class FireOutcome(StrEnum):
    """How one attempt ended, stored as these exact strings."""

    SUCCEEDED = "succeeded"  #: every listener returned
    FAILED = "failed"  #: a listener (or the publisher) raised; ``error`` says what
    #: the job's misfire policy skipped this late occurrence, or its overlap policy skipped the
    #: occurrences that came due while the previous one ran (``error`` then says ``overlap: ...``);
    #: no listener ran
    SKIPPED = "skipped"
    #: no listener heard the event (none for its topic in the firing process, nor any other
    #: instance when events are broadcast): the job moved on as after a success, unless the
    #: ``unheard_fails`` setting made it a failed attempt (then ``error`` says so)
    UNHEARD = "unheard"
    #: the listeners ran past the fire's time limit: an ``async def`` listener was cancelled, a
    #: sync one left running (its late result ignored); counts as a failed attempt, and the job's
    #: retry policy applies (``error`` says what the limit was)
    TIMEOUT = "timeout"


def parse_outcome(value: FireOutcome | str) -> FireOutcome:
    """The outcome named ``value``.

    :raises InvalidStatus: it names none (the message lists the outcomes)."""
    from schedule_sdk.domain.errors import InvalidStatus
    from schedule_sdk.domain.text import shown

    try:
        return FireOutcome(value)
    except ValueError:
        known = ", ".join(outcome.value for outcome in FireOutcome)
        raise InvalidStatus(f"no fire outcome {shown(value)}: one of {known}") from None


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
    #: ``"<ExceptionType>: <message>"`` for a failed attempt; for occurrences the overlap
    #: policy skipped, ``"overlap: <how many> occurrence(s) from <first> came due while ..."``;
    #: else None.
    error: str | None
    #: The id of the worker that held the claim.
    worker_id: str | None
    #: The traceback of a failed attempt's error(s), the tail kept within
    #: :data:`MAX_TRACEBACK_BYTES` of UTF-8; None when the attempt did not fail or no traceback
    #: exists (a fire that nobody heard, an entry written before tracebacks were kept).
    traceback: str | None = None

    @property
    def failed(self) -> bool:
        """The attempt counts as failed: a listener raised or ran past the time limit, or nobody
        heard it with the ``unheard_fails`` setting on."""
        return self.outcome in (FireOutcome.FAILED, FireOutcome.TIMEOUT) or (
            self.outcome is FireOutcome.UNHEARD and self.error is not None
        )


#: The most a fire history entry keeps of a traceback, in bytes of UTF-8: its tail (where the
#: error was raised), after a line saying how much was cut.
MAX_TRACEBACK_BYTES = 8192


def capped_traceback(text: str, limit: int = MAX_TRACEBACK_BYTES) -> str:
    """``text`` if it fits in ``limit`` bytes of UTF-8, else its tail, whole lines where it can,
    after a line saying how many bytes were cut; the result fits in ``limit`` bytes."""
    data = text.encode()
    if len(data) <= limit:
        return text
    tail = data[-(limit - 64) :]
    newline = tail.find(b"\n")
    if 0 <= newline < len(tail) // 2:
        tail = tail[newline + 1 :]  # start at a whole line
    kept = tail.decode(errors="ignore")
    return f"[... {len(data) - len(kept.encode())} bytes cut ...]\n{kept}"


# -- lateness classes: the fixed histogram the per-minute summary and the dashboard share ------

#: Upper bounds (ms) of the lateness classes, in 1-2-5 steps to one hour: class ``i`` holds the
#: lateness values ``<= LATENESS_BOUNDS[i]`` not in a lower class; class ``len(LATENESS_BOUNDS)``
#: holds everything later. Fixed: stored per-minute counts are per class, so changing a bound
#: would need a migration that recounts them.
LATENESS_BOUNDS: tuple[int, ...] = tuple(
    m * 10**e for e in range(0, 7) for m in (1, 2, 5) if m * 10**e <= 3_600_000
) + (3_600_000,)


def lateness_class(lateness_ms: int) -> int:
    """The class of a lateness in ms (negative values are in class 0)."""
    return bisect.bisect_left(LATENESS_BOUNDS, lateness_ms)
