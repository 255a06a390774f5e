"""What fires next, across every open job (:meth:`ScheduleService.upcoming`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schedule_sdk.domain.timing import FireMark, FireTime


@dataclass(frozen=True, kw_only=True, slots=True)
class UpcomingFire:
    """One fire of one open job inside the window asked for."""

    job_id: str
    topic: str
    tenant_id: str | None
    #: The UTC instant and the local time in the cron's (else the job's) zone, with a DST mark.
    fire: FireTime
    #: The job is paused: this fire happens only if it is resumed first.
    paused: bool

    @property
    def at(self) -> datetime:
        return self.fire.at

    @property
    def mark(self) -> FireMark | None:
        return self.fire.mark

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "topic": self.topic,
            "tenant_id": self.tenant_id,
            "paused": self.paused,
            **self.fire.to_dict(),
        }
