"""The dashboard's "Next 24 h" page: what fires next, grouped by job (each job's next fires and
its count in the window, counted rather than listed) or as an hour-by-hour timeline paged with a
cursor; filtered by topic, owner and tenant, within the operator's tenant scope (one read per
tenant in scope, merged)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from schedule_sdk.core.service import ScheduleService
from schedule_sdk.core.upcoming import encode_cursor
from schedule_sdk.domain.errors import ScheduleValidationError
from schedule_sdk.domain.upcoming import UpcomingFire, UpcomingGroup
from schedule_sdk.entrypoints.dashboard import coupling
from schedule_sdk.entrypoints.dashboard.forms import text_of
from schedule_sdk.entrypoints.dashboard.security import Grant
from schedule_sdk.ports import DeclaredRows

#: The page looks this far ahead.
UPCOMING_WINDOW = timedelta(hours=24)
#: The timeline shows this many fires a page (then a link to the next page).
UPCOMING_LIMIT = 500
#: The grouped view shows at most this many jobs (with the count of the others).
UPCOMING_JOBS = 1000
#: Each job's next fires the grouped view shows.
PER_JOB = 3
VIEWS = ("jobs", "timeline")


def upcoming_values(
    service: ScheduleService, declared: DeclaredRows | None, grant: Grant, query: Mapping[str, str]
) -> dict[str, Any]:
    """What ``upcoming.html`` renders for the query string ``query`` (``view``, ``topic``,
    ``owner``, ``tenant``, ``cursor``); ``error`` is set (and nothing read) when an input is refused."""
    form = {k: (query.get(k) or "").strip() for k in ("view", "topic", "owner", "tenant")}
    view = form["view"] if form["view"] in VIEWS else "jobs"
    values: dict[str, Any] = {
        "form": form,
        "view": view,
        "window_hours": int(UPCOMING_WINDOW.total_seconds() // 3600),
        "limit": UPCOMING_LIMIT,
        "groups": [],
        "hours": [],
        "jobs": 0,
        "fires": 0,
        "shown": 0,
        "exact": True,
        "truncated": False,
        "next_url": None,
        "error": None,
    }
    try:
        filters = {
            "topic": text_of(form["topic"], "the topic filter", 200),
            "owner": text_of(form["owner"], "the owner filter", 255),
        }
        tenant = text_of(form["tenant"], "the tenant filter", 255)
        cursor = text_of(query.get("cursor"), "the cursor", 1000)
        tenants: list[str | None] = [tenant] if grant.tenants is None else [*sorted(grant.tenants)]
        if tenant is not None and grant.tenants is not None:
            tenants = [tenant] if tenant in grant.tenants else []
        names = {} if declared is None else coupling.declared_names(declared)
        if view == "jobs":
            values.update(_grouped(service, tenants, filters, names))
        else:
            values.update(_timeline(service, tenants, filters, cursor, names, form))
    except ScheduleValidationError as problem:
        values["error"] = (problem.message, problem.code)
    return values


def _grouped(
    service: ScheduleService, tenants: list[str | None], filters: dict[str, Any], names: dict[str, str]
) -> dict[str, Any]:
    parts = [
        service.upcoming_by_job(UPCOMING_WINDOW, per_job=PER_JOB, limit=UPCOMING_JOBS, tenant=t, **filters)
        for t in tenants
    ]
    merged = heapq.merge(*(p.groups for p in parts), key=lambda g: (g.first, g.job_id))
    groups: list[tuple[UpcomingGroup, str | None]] = [(g, names.get(g.job_id)) for g in merged]
    jobs = sum(p.jobs for p in parts)
    return {
        "groups": groups[:UPCOMING_JOBS],
        "jobs": jobs,
        "fires": sum(p.fires for p in parts),
        "shown": min(len(groups), UPCOMING_JOBS),
        "exact": all(p.exact for p in parts),
        "truncated": jobs > min(len(groups), UPCOMING_JOBS),
    }


def _timeline(
    service: ScheduleService,
    tenants: list[str | None],
    filters: dict[str, Any],
    cursor: str | None,
    names: dict[str, str],
    form: dict[str, str],
) -> dict[str, Any]:
    parts = [
        service.upcoming_page(UPCOMING_WINDOW, limit=UPCOMING_LIMIT, cursor=cursor, tenant=t, **filters)
        for t in tenants
    ]
    merged = heapq.merge(*(p.items for p in parts), key=lambda f: (f.at, f.job_id))
    fires = list(merged)[:UPCOMING_LIMIT]
    total = sum(p.total for p in parts)
    truncated = total > len(fires)
    next_url = None
    if truncated and fires:
        kept = {k: v for k, v in form.items() if v}
        last = encode_cursor((fires[-1].at, fires[-1].job_id))
        next_url = "?" + urlencode({**kept, "view": "timeline", "cursor": last})
    hours: list[tuple[datetime, list[tuple[UpcomingFire, str | None]]]] = []
    for fire in fires:
        hour = fire.at.replace(minute=0, second=0, microsecond=0)
        if not hours or hours[-1][0] != hour:
            hours.append((hour, []))
        hours[-1][1].append((fire, names.get(fire.job_id)))
    return {
        "hours": hours,
        "fires": total,
        "shown": len(fires),
        "exact": all(p.exact for p in parts),
        "truncated": truncated,
        "next_url": next_url,
    }
