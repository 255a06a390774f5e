"""A claim's lease: how long a worker's claim on a fire lasts without renewal (after a crash, the
fire runs again once it has passed). One rule for every claimant and every renewal."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True, slots=True)
class Lease:
    """``seconds`` of claim, counted from the instant a claim is taken or renewed."""

    seconds: float

    def until(self, now: datetime) -> datetime:
        """The end of a lease taken or renewed at ``now``."""
        return now + timedelta(seconds=self.seconds)
