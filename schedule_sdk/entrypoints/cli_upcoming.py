"""``schedule-sdk upcoming``: what fires in a window (default the next 24 h), from the CLI.

The fires in time order, a page at a time (``--limit``, ``--cursor``), with how many the window
holds and whether the list was cut; or ``--group``: one line per job, with its next fires and
its count in the window. ``--topic``, ``--tenant`` and ``--owner`` filter.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from schedule_sdk.domain.errors import ScheduleValidationError
from schedule_sdk.entrypoints.cli_context import Context, UsageError


def _window(text: str) -> timedelta:
    from schedule_sdk.core.retention import parse_duration

    try:
        return parse_duration(text)
    except ScheduleValidationError as error:
        raise UsageError(f"--within: {error}") from error


def _filters(ctx: Context) -> dict[str, Any]:
    return {"topic": ctx.args.topic, "tenant": ctx.args.tenant, "owner": ctx.args.owner}


def cmd_upcoming(ctx: Context) -> int:
    window = _window(ctx.args.within)
    service = ctx.container.schedule_service()
    try:
        if ctx.args.group:
            grouped = service.upcoming_by_job(
                window, per_job=ctx.args.per_job, limit=ctx.args.limit, **_filters(ctx)
            )
        else:
            page = service.upcoming_page(
                window, limit=ctx.args.limit, cursor=ctx.args.cursor, **_filters(ctx)
            )
    except ScheduleValidationError as error:
        text = error.message.partition(": page on")[0].replace("per_job", "--per-job")
        raise UsageError(text.replace("limit", "--limit").replace("cursor", "--cursor")) from error
    if ctx.args.json:
        json.dump((grouped if ctx.args.group else page).to_dict(), ctx.out, indent=2)
        ctx.out.write("\n")
        return 0
    at_least = ""
    if ctx.args.group:
        for group in grouped.groups:
            fires = ", ".join(f.at.isoformat(timespec="seconds") for f in group.fires)
            paused = " (paused)" if group.paused else ""
            more = "+" if not group.exact else ""
            count = f"{group.count}{more} fire(s)"
            ctx.out.write(f"{group.job_id}  {group.topic}  {count}  next {fires}{paused}\n")
        at_least = "" if grouped.exact else "at least "
        cut = f" (showing the first {len(grouped.groups)} jobs)" if grouped.truncated else ""
        total = f"{at_least}{grouped.fires} fire(s)"
        ctx.out.write(f"{grouped.jobs} job(s), {total} within {ctx.args.within}{cut}\n")
        return 0
    for item in page.items:
        paused = " (paused)" if item.paused else ""
        mark = f" [{item.mark}]" if item.mark else ""
        excluded = " (excluded by its calendar)" if item.fire.excluded else ""
        ctx.out.write(
            f"{item.at.isoformat(timespec='seconds')}  {item.fire.local.isoformat(timespec='seconds')}  "
            f"{item.topic}  {item.job_id}{paused}{mark}{excluded}\n"
        )
    at_least = "" if page.exact else "at least "
    ctx.out.write(f"{len(page.items)} of {at_least}{page.total} fire(s) within {ctx.args.within}")
    if page.truncated:
        ctx.out.write(f"; truncated: --cursor {page.next_cursor} for the next {ctx.args.limit}")
    ctx.out.write("\n")
    return 0


def add_commands(commands: Any, command: Any) -> None:
    """Add ``upcoming`` to the CLI's subcommands."""
    upcoming = command(
        commands, "upcoming", cmd_upcoming, "print what fires in a window (default 24h), paged or by job"
    )
    upcoming.add_argument("--within", default="24h", help="the window from now: 24h, 90m, 7d (default 24h)")
    upcoming.add_argument("--json", action="store_true", help="print JSON")
    upcoming.add_argument("--group", action="store_true", help="one line per job: its next fires and count")
    upcoming.add_argument("--topic", help="only jobs of this topic")
    upcoming.add_argument("--tenant", help="only jobs of this tenant")
    upcoming.add_argument("--owner", help="only jobs of this owner")
    upcoming.add_argument(
        "--limit", type=int, default=100, help="fires per page, or jobs with --group (1-1000, default 100)"
    )
    upcoming.add_argument("--cursor", help="the next_cursor a truncated page printed")
    upcoming.add_argument(
        "--per-job", type=int, default=3, help="with --group: next fires per job (default 3)"
    )
