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


@dataclass(frozen=True, kw_only=True, slots=True)
class UpcomingPage:
    """One page of the fires in a window, in time order (:meth:`ScheduleService.upcoming_page`)."""

    items: list[UpcomingFire]
    #: How many fires the window holds from this page's start on (this page's included; a lower
    #: bound when ``exact`` is False).
    total: int
    #: More fires follow in the window than this page holds: pass ``next_cursor`` for them.
    truncated: bool
    next_cursor: str | None
    #: False when a cron fires more often in the window than a count enumerates: ``total`` is
    #: then at least that.
    exact: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": [f.to_dict() for f in self.items],
            "total": self.total,
            "truncated": self.truncated,
            "next_cursor": self.next_cursor,
            "exact": self.exact,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class UpcomingGroup:
    """One open job's fires in a window: its next few, and how many it has in all."""

    job_id: str
    topic: str
    tenant_id: str | None
    owner_id: str | None
    paused: bool
    #: How many fires the job has in the window (calendar-excluded ones included, marked in
    #: ``fires``); a lower bound when ``exact`` is False.
    count: int
    #: Its first fires in the window, in time order (at most the ``per_job`` asked for).
    fires: list[FireTime]
    exact: bool = True

    @property
    def first(self) -> datetime:
        return self.fires[0].at

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "topic": self.topic,
            "tenant_id": self.tenant_id,
            "owner_id": self.owner_id,
            "paused": self.paused,
            "count": self.count,
            "exact": self.exact,
            "fires": [f.to_dict() for f in self.fires],
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class UpcomingGroups:
    """The fires in a window grouped by job, ordered by each job's first fire
    (:meth:`ScheduleService.upcoming_by_job`)."""

    groups: list[UpcomingGroup]
    #: How many jobs have a fire in the window (``groups`` holds the first ``limit`` of them).
    jobs: int
    #: How many fires the window holds across those jobs (a lower bound when ``exact`` is False).
    fires: int
    #: More jobs have fires in the window than ``groups`` holds.
    truncated: bool
    exact: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "groups": [g.to_dict() for g in self.groups],
            "jobs": self.jobs,
            "fires": self.fires,
            "truncated": self.truncated,
            "exact": self.exact,
        }
