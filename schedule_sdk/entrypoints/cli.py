"""``schedule-sdk`` (also ``python -m schedule_sdk``): run workers, inspect and manage jobs, migrate.

Configuration comes from the same ``SCHEDULE_*`` environment variables as the library; the global
``--database-url`` and ``--redis-url`` options override them. Errors are one line on stderr
(``schedule-sdk: error: ...``) with an exit code scripts can rely on (see :data:`EPILOG`).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO

from schedule_sdk.domain.errors import (
    InvalidSetting,
    JobFinished,
    JobNotFound,
    NotRequeueable,
    NotReschedulable,
    NotTriggerable,
    ScheduleUnavailable,
    ScheduleValidationError,
)
from schedule_sdk.domain.text import json_escaped, masked_url, shown, without_secret
from schedule_sdk.entrypoints import cli_schedules, cli_upcoming
from schedule_sdk.entrypoints.cli_context import (
    ERROR,
    NOT_FOUND,
    OK,
    UNAVAILABLE,
    UNHEALTHY,
    USAGE,
    Context,
    UsageError,
    import_listener_modules,
    one_line,
)

if TYPE_CHECKING:
    import sqlalchemy as sa

    from schedule_sdk.bootstrap.container import ScheduleContainer
    from schedule_sdk.bootstrap.settings import Settings
    from schedule_sdk.core.reconciler import ReconcileReport
    from schedule_sdk.domain.history import FireRecord
    from schedule_sdk.domain.jobs import RepeatSpec, ScheduledJob
    from schedule_sdk.domain.timing import FireTime

# The CLI's start-up imports no store, container or web framework: ``--help`` and ``cron`` need
# none of them, and each command imports what it uses inside itself.

__all__ = [
    "ERROR",
    "NOT_FOUND",
    "OK",
    "UNAVAILABLE",
    "UNHEALTHY",
    "USAGE",
    "Context",
    "UsageError",
    "beat_age",
    "build_parser",
    "clock_offset",
    "fire_to_dict",
    "import_listener_modules",
    "job_to_dict",
    "main",
    "run_in",
]

EPILOG = """\
configuration:
  Every SCHEDULE_* environment variable of the library applies (SCHEDULE_DATABASE_URL,
  SCHEDULE_REDIS_URL, SCHEDULE_SUBSTRATE, SCHEDULE_LISTENER_MODULES, ...); --database-url and
  --redis-url override the first two.

exit codes:
  0  success
  1  refused (e.g. pausing a finished job) or an unexpected error
  2  usage or configuration error (bad option, bad database/Redis URL, invalid setting)
  3  not found (unknown job id)
  4  a backing service is unavailable (database, Redis, broker)
  5  health: unhealthy (no live worker, or the oldest due job waited too long);
     db current: the schema needs 'schedule-sdk db upgrade'
"""


# -- helpers ---------------------------------------------------------------------------------------


def _check_urls(settings: Settings) -> None:
    """Refuse URLs no adapter can use before anything tries to connect."""
    import sqlalchemy as sa

    from schedule_sdk.domain.redis_url import sentinel_target

    masked = masked_url(settings.database_url)  # never print a password
    try:
        url = sa.make_url(settings.database_url)
        url.get_dialect()
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError, ValueError) as error:
        detail = without_secret(one_line(error), settings.database_url)
        raise UsageError(f"bad database URL {masked!r}: {detail}") from None
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise UsageError(f"bad database URL {masked!r}: use sqlite:/// or postgresql://")
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        raise UsageError(f"bad database URL {masked!r}: SQLite needs a file (sqlite:///jobs.db)")
    if settings.redis_url:
        try:
            sentinel_target(settings.redis_url)
        except InvalidSetting as error:
            raise UsageError(str(error)) from None


def job_to_dict(job: ScheduledJob) -> dict[str, Any]:
    """A JSON-ready view of a stored job (times as ISO 8601 UTC; the time limit as
    ``time_limit_ms``, whole milliseconds or None)."""
    from schedule_sdk.domain.jobs import ScheduledJob
    from schedule_sdk.domain.time_limits import limit_ms

    data: dict[str, Any] = {}
    for name in ScheduledJob.__dataclass_fields__:
        value = getattr(job, name)
        if name == "time_limit":
            data["time_limit_ms"] = None if value is None else limit_ms(value)
            continue
        if hasattr(value, "isoformat"):
            value = value.isoformat()
        elif hasattr(value, "to_dict"):
            value = value.to_dict()
        data[name] = value
    data["status"] = job.status.value
    return data


def _write_json(ctx: Context, value: Any) -> None:
    ctx.out.write(json_escaped(json.dumps(value, indent=2, ensure_ascii=False)) + "\n")


# -- commands --------------------------------------------------------------------------------------


def cmd_worker(ctx: Context) -> int:
    from schedule_sdk.entrypoints.stopping import StopSignals

    settings = ctx.settings
    modules = settings.listener_modules
    import_listener_modules(modules)
    ctx.container.listeners()  # binds the @on_event functions of these modules to this container
    with StopSignals() as stop:
        worker = ctx.container.worker()
        worker.start()
        if ctx.args.metrics_port:
            host = _serve_probes(ctx, worker)
            ctx.notice(f"/metrics, /healthz and /readyz on http://{host}:{ctx.args.metrics_port}/")
        # A process of our own: keep start-up objects out of the cyclic GC's scans, which
        # otherwise show up as multi-millisecond pauses in fire lateness.
        gc.collect()
        gc.freeze()
        ctx.notice(
            f"worker {settings.worker_id} started ({settings.execution_substrate} substrate, "
            f"{len(modules)} listener module(s)); SIGTERM or Ctrl-C stops it"
        )
        stop.wait()
        ctx.notice(f"stopping (in-flight fires get {settings.stop_timeout:g}s)")
        worker.stop()
    return OK


def _serve_probes(ctx: Context, worker: Any) -> str:
    """Serve the worker's HTTP port (metrics and probes); return the host it binds."""
    from schedule_sdk.core.health import container_health
    from schedule_sdk.entrypoints.probes import ProbeServer

    metrics = ctx.container.metrics()
    host: str = ctx.args.metrics_host
    probes = ProbeServer(
        live=lambda: bool(worker.running),
        ready=lambda: container_health(ctx.container),
        metrics=getattr(metrics, "exposition", None),
    )
    try:
        probes.serve(ctx.args.metrics_port, host)
    except OSError as error:
        raise UsageError(f"cannot serve on {host}:{ctx.args.metrics_port}: {error}") from error
    return host


# -- dashboard ----------------------------------------------------------------------

DASHBOARD_TOKEN_ENV = "SCHEDULE_DASHBOARD_TOKEN"


def cmd_dashboard(ctx: Context) -> int:
    try:
        import uvicorn

        from schedule_sdk.entrypoints.dashboard import create_dashboard
    except ImportError as error:
        raise UsageError(f"the dashboard needs: pip install 'schedule-sdk[dashboard]' ({error})") from error
    token = os.environ.get(DASHBOARD_TOKEN_ENV) or None
    app = create_dashboard(ctx.container, token=token)
    mode = "actions need the token" if token else f"read-only (set ${DASHBOARD_TOKEN_ENV} to allow actions)"
    ctx.notice(f"dashboard on http://{ctx.args.host}:{ctx.args.port}/ ({mode})")
    ctx.err.flush()
    uvicorn.run(app, host=ctx.args.host, port=ctx.args.port, log_level="warning")
    return OK


# -----------------------------------------------------------------------------------------------


def cmd_reconcile(ctx: Context) -> int:
    def progress(report: ReconcileReport) -> None:
        ctx.progress(f"reconciling: scanned {report.scanned}, healed {report.healed}")

    report = ctx.container.reconciler().run(progress=progress)
    ctx.progress(f"reconciled: scanned {report.scanned}, healed {report.healed}", final=True)
    if ctx.args.json:
        _write_json(ctx, report.as_dict())
    else:
        ctx.out.write(" ".join(f"{k}={v}" for k, v in report.as_dict().items()) + "\n")
    return OK


def _table(ctx: Context, rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        ctx.out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n")


def cmd_workers(ctx: Context) -> int:
    from schedule_sdk.core.liveness import is_dead

    store_time = ctx.container.store_time()
    store_time.measure()  # beats are stamped by the store's clock: judge them by it
    now = store_time.now()
    from schedule_sdk.ports import WorkerRegistry, require

    workers = require(ctx.container.store(), WorkerRegistry, "schedule-sdk workers").workers()
    dead_after = ctx.settings.dead_after
    states = ["dead" if is_dead(x, now, dead_after) else "live" for x in workers]
    if ctx.args.json:
        items = [
            {
                **{k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(x).items()},
                "state": state,
                "beat_age_seconds": round((now - x.last_beat).total_seconds(), 3),
            }
            for x, state in zip(workers, states, strict=True)
        ]
        _write_json(ctx, {"workers": items, "dead_after": dead_after})
        return OK
    rows = [
        (
            "ID",
            "HOST",
            "PID",
            "SUBSTRATE",
            "STARTED",
            "LAST_BEAT",
            "IN_FLIGHT",
            "STUCK",
            "CLOCK_OFFSET",
            "STATE",
        )
    ]
    rows += [
        (
            x.id,
            x.host,
            str(x.pid),
            x.substrate,
            x.started_at.isoformat(timespec="seconds"),
            beat_age(now, x.last_beat),
            str(x.in_flight),
            str(x.stuck),
            clock_offset(x.clock_offset, x.clock_error),
            state,
        )
        for x, state in zip(workers, states, strict=True)
    ]
    _table(ctx, rows)
    return OK


def clock_offset(offset: float | None, error: float | None) -> str:
    """``+0.002s±0.001`` (seconds to add to the worker's clock to read the store's, as measured at
    its last beat, and the measurement's error bound); ``-`` when not measured."""
    if offset is None:
        return "-"
    return f"{offset:+.3f}s" + ("" if error is None else f"±{error:.3f}")


def beat_age(now: datetime, beat: datetime) -> str:
    """``1.2s ago``; a beat stamped ahead of this host's clock (skew) reads ``0.0s ago``, never
    ``-0.0s ago``."""
    return f"{max(0.0, (now - beat).total_seconds()):.1f}s ago"


def cmd_health(ctx: Context) -> int:
    from schedule_sdk.core.health import container_health

    report = container_health(
        ctx.container, min_workers=ctx.args.min_workers, max_backlog_age=ctx.args.max_backlog_age
    )
    if ctx.args.json:
        _write_json(ctx, report.as_dict())
    else:
        for check in report.checks:
            state = "FAIL" if not check.ok else "WARN" if check.warning else "ok"
            ctx.out.write(f"{check.name:8} {state:4}  {check.detail}\n")
        verdict = "unhealthy" if not report.ok else "healthy (degraded)" if report.degraded else "healthy"
        ctx.out.write(f"{verdict}\n")
    if report.ok:
        return OK
    return UNAVAILABLE if report.unavailable else UNHEALTHY


def cmd_timer(ctx: Context) -> int:
    try:
        module = importlib.import_module("schedule_sdk.entrypoints.timer_service")
    except ImportError as error:
        raise UsageError(f"the timer service is not available: {one_line(error)}") from error
    timer_main: Callable[[list[str]], int] = module.main
    try:
        return int(timer_main(list(ctx.args.timer_args)) or 0)
    except SystemExit as exit_:  # its own --help or usage error
        return exit_.code if isinstance(exit_.code, int) else USAGE if exit_.code else OK


def _statuses(values: Sequence[str] | None) -> list[str] | None:
    if not values:
        return None
    return [s.strip() for v in values for s in v.split(",") if s.strip()]


def cmd_jobs_list(ctx: Context) -> int:
    from schedule_sdk.domain.jobs import shown_status

    a = ctx.args
    page = ctx.container.schedule_service().list(
        owner_id=a.owner_id,
        tenant_id=a.tenant_id,
        topic=a.topic,
        status=_statuses(a.status),
        limit=a.limit,
        cursor=a.cursor,
        outcome=_statuses(a.outcome),
    )
    if a.json:
        _write_json(ctx, {"items": [job_to_dict(j) for j in page.items], "next_cursor": page.next_cursor})
        return OK
    rows: list[tuple[str, ...]] = [("ID", "TOPIC", "STATUS", "RUN_AT", "OCCURRENCE", "ATTEMPT")]
    rows += [
        (j.id, j.topic, shown_status(j), j.run_at.isoformat(), str(j.occurrence), str(j.attempt))
        for j in page.items
    ]
    _table(ctx, rows)
    if page.next_cursor:
        ctx.out.write(f"next page: --cursor {page.next_cursor}\n")
    return OK


def cmd_jobs_show(ctx: Context) -> int:
    from schedule_sdk.core.service import shown_history

    service = ctx.container.schedule_service()
    job = service.get_by_id(ctx.args.job_id)
    if job is None:
        raise JobNotFound(ctx.args.job_id)
    record = job_to_dict(job)
    if job.run_of is not None:
        record["note"] = f"run of {job.run_of}: fires its occurrence {job.occurrence} (overlap 'allow')"
    elif job.notice is not None and job.payload is not None:
        record["note"] = (
            f"notice: delivers the schedule.failed event of job {job.payload['event']['scheduled_job_id']}"
        )
    record["history"] = [fire_to_dict(f) for f in shown_history(service, job, ctx.args.history)]
    record["next_fire_times"] = [fire.to_dict() for fire in service.preview(job.id, n=5)]
    _write_json(ctx, record)
    return OK


def cmd_cron(ctx: Context) -> int:
    """Print the next fire times of a cron expression (no database needed)."""
    a = ctx.args
    try:
        after = datetime.fromisoformat(a.after) if a.after else datetime.now(UTC)
    except ValueError:
        after = None
    if after is None or after.tzinfo is None:
        raise UsageError(f"--after must be an ISO 8601 time with an offset (Z or +hh:mm): {shown(a.after)}")
    fires = _cron_spec(a).next_fire_times(after, a.n)
    if a.json:
        _write_json(ctx, [fire.to_dict() for fire in fires])
        return OK
    rows = [("LOCAL", "UTC", "NOTE")]
    for fire in fires:
        local = fire.local.strftime("%Y-%m-%d %a %H:%M %z")
        utc = fire.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        rows.append((local, utc, _fire_note(fire)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        ctx.out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n")
    return OK


def _cron_spec(a: argparse.Namespace) -> RepeatSpec:
    """The spec ``schedule-sdk cron`` previews: the expression in ``--tz``, with ``--spread`` (and
    ``--spread-key``) and the calendar of ``--exclude-weekday``, ``--exclude-date`` and
    ``--holidays``."""
    from schedule_sdk.domain.calendars import Calendar, HolidaySpec
    from schedule_sdk.domain.jobs import CronRepeat, RepeatSpec

    spread = None if a.spread is None else timedelta(seconds=a.spread)
    dates: list[date] = []
    for text in a.exclude_date or ():
        try:
            dates.append(date.fromisoformat(text))
        except ValueError:
            raise UsageError(f"--exclude-date must be a date such as 2027-12-24, not {shown(text)}") from None
    holiday = None
    if a.holidays:
        country, _, subdivision = a.holidays.partition("-")
        holiday = HolidaySpec(country=country, subdivision=subdivision or None)
    names = [w.strip() for text in a.exclude_weekday or () for w in text.split(",")]
    weekdays = [int(w) if w.isdigit() else w for w in names]
    calendar = (
        Calendar(dates=dates, weekdays=weekdays, holidays=holiday) if dates or weekdays or holiday else None
    )
    return RepeatSpec(
        topic="cli.preview",
        timezone=a.tz,
        repeat=CronRepeat(expression=a.expression, timezone=a.tz),
        spread=spread,
        spread_key=a.spread_key if spread is not None else None,
        calendar=calendar,
    )


def _fire_note(fire: FireTime) -> str:
    walls = ", ".join(wall.strftime("%H:%M") for wall in fire.scheduled)
    notes = []
    if fire.excluded:
        notes.append("excluded: its date is excluded by the calendar (reported missed)")
    if fire.nominal is not None:
        notes.append(f"spread: nominal {fire.nominal.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    if fire.mark == "moved":
        notes.append(f"moved: {walls} does not exist (clock went forward)")
    if fire.mark == "merged":
        notes.append(f"merged: {walls} fire once (clock went forward)")
    if fire.mark == "repeated":
        notes.append("repeated: second pass (clock went back)")
    return "; ".join(notes)


def fire_to_dict(fire: FireRecord) -> dict[str, Any]:
    """A JSON-ready fire history entry (times as ISO 8601 UTC)."""
    from schedule_sdk.domain.history import FireRecord

    data = {name: getattr(fire, name) for name in FireRecord.__dataclass_fields__}
    data.update(due_at=fire.due_at.isoformat(), fired_at=fire.fired_at.isoformat())
    data["outcome"] = fire.outcome.value
    return data


def cmd_jobs_cancel(ctx: Context) -> int:
    service = ctx.container.schedule_service()
    service.cancel(ctx.args.job_id)
    job = service.get_by_id(ctx.args.job_id)
    ctx.out.write(f"{ctx.args.job_id} {job.status.value if job else 'cancelled'}\n")
    return OK


def cmd_jobs_steer(ctx: Context) -> int:
    service = ctx.container.schedule_service()
    job_id = ctx.args.job_id
    action = ctx.args.jobs_command
    job = {"pause": service.pause, "resume": service.resume, "trigger": service.trigger}[action](job_id)
    suffix = " (fires now)" if action == "trigger" else ""
    ctx.out.write(f"{job_id} {job.status.value}{suffix}\n")
    return OK


def cmd_jobs_requeue(ctx: Context) -> int:
    """Requeue each id in turn (each its own transaction): a refusal of one is reported on stderr
    and the others still run; the exit code is the first refusal's (0 when all were requeued)."""
    service = ctx.container.schedule_service()
    code = OK
    for job_id in ctx.args.job_ids:
        try:
            job = service.requeue(job_id)
        except (JobNotFound, NotRequeueable) as error:
            ctx.err.write(f"schedule-sdk: error: {one_line(error)}\n")
            code = code or _exit_code(error)
            continue
        ctx.out.write(
            f"{job_id} {job.status.value} (occurrence {job.occurrence}, due {job.run_at.isoformat()})\n"
        )
    return code


def cmd_jobs_purge(ctx: Context) -> int:
    from schedule_sdk.core.retention import parse_duration

    try:
        older_than = parse_duration(ctx.args.older_than)
    except ScheduleValidationError as error:
        raise UsageError(f"--older-than: {error}") from error
    if not 1 <= ctx.args.batch_size <= 100_000:
        raise UsageError("--batch-size must be between 1 and 100000")
    from schedule_sdk.core.retention import Purger

    purger = Purger(
        store=ctx.container.store(),
        clock=ctx.container.clock(),
        retention=None,
        batch_size=ctx.args.batch_size,
    )
    total = purger.purge(older_than, progress=lambda n: ctx.progress(f"purging: {n} deleted"))
    ctx.progress(f"purged: {total} deleted", final=True)
    history = purger.purge_history(
        older_than, progress=lambda n: ctx.progress(f"purging fire history: {n} deleted")
    )
    ctx.progress(f"purged fire history: {history} deleted", final=True)
    ctx.out.write(f"purged {total} finished jobs older than {ctx.args.older_than}\n")
    ctx.out.write(f"purged {history} fire history rows older than {ctx.args.older_than}\n")
    return OK


@contextlib.contextmanager
def _engine(ctx: Context) -> Iterator[sa.Engine]:
    from schedule_sdk.adapters.sql.engine import make_engine

    engine = make_engine(ctx.settings.database_url, pool_size=1, pooler=ctx.settings.database_pooler)
    try:
        yield engine
    finally:
        engine.dispose()


def cmd_db_current(ctx: Context) -> int:
    from schedule_sdk.adapters.sql import schema

    with _engine(ctx) as engine:
        current, head = schema.current_revision(engine), schema.head_revision()
    state = "up to date" if current == head else "needs 'schedule-sdk db upgrade'"
    ctx.out.write(f"current: {current or 'none'}\nhead: {head}\n({state})\n")
    return OK if current == head else UNHEALTHY


def cmd_db_upgrade(ctx: Context) -> int:
    from schedule_sdk.adapters.sql import schema

    with _engine(ctx) as engine:
        current, head = schema.current_revision(engine), schema.head_revision()
        if current == head:
            ctx.out.write(f"already at {head}\n")
            return OK
        ctx.progress(f"upgrading {masked_url(engine.url.render_as_string())}: {current or 'empty'} -> {head}")
        with _alembic_progress(ctx):
            schema.upgrade(engine)
        ctx.out.write(f"upgraded {current or 'empty'} -> {schema.current_revision(engine)}\n")
    return OK


@contextlib.contextmanager
def _alembic_progress(ctx: Context) -> Iterator[None]:
    """Show each migration step ("Running upgrade a -> b") on stderr while it runs."""
    migration_log = logging.getLogger("alembic.runtime.migration")
    handler = logging.StreamHandler(ctx.err)
    handler.setFormatter(logging.Formatter("  %(message)s"))
    handler.addFilter(lambda record: record.getMessage().startswith("Running"))
    saved = migration_log.level, migration_log.propagate
    if not ctx.args.quiet:
        migration_log.addHandler(handler)
        migration_log.setLevel(logging.INFO)
        migration_log.propagate = bool(ctx.args.verbose)  # the root handler shows it too with -v
    try:
        yield
    finally:
        migration_log.removeHandler(handler)
        migration_log.setLevel(saved[0])
        migration_log.propagate = saved[1]


# -- the parser ------------------------------------------------------------------------------------


#: The options every command takes: (flags, keywords, default).
_COMMON: tuple[tuple[tuple[str, ...], dict[str, Any], object], ...] = (
    (("--database-url",), {"help": "job store URL (default: $SCHEDULE_DATABASE_URL)"}, None),
    (("--redis-url",), {"help": "Redis URL; selects the rq substrate (default: $SCHEDULE_REDIS_URL)"}, None),
    (("-v", "--verbose"), {"action": "count", "help": "more logging (-vv: debug)"}, 0),
    (("-q", "--quiet"), {"action": "store_true", "help": "no progress output"}, False),
    (("--log-format",), {"choices": ("text", "json"), "help": "json: one object per line"}, "text"),
)


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """The options every command takes. The top-level parser's copy holds the defaults; each
    command's copy has none (``SUPPRESS``), so an option given after the command is taken and one
    given before it is not reset by the command's parser."""
    common = argparse.ArgumentParser(add_help=False)
    for flags, keywords, default in _COMMON:
        common.add_argument(*flags, default=default if defaults else argparse.SUPPRESS, **keywords)
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common_options(defaults=True)
    after = _common_options(defaults=False)
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="schedule-sdk",
        description="Run schedule_sdk workers, inspect and manage jobs, migrate the database.",
        epilog=EPILOG,
        formatter_class=fmt,
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(
        parent: Any, name: str, handler: Callable[[Context], int] | None, text: str, **kw: Any
    ) -> Any:
        if handler is not None and handler is not cmd_timer:  # the timer's options are its own
            kw.setdefault("parents", [after])
        sub = parent.add_parser(name, help=text, description=text, epilog=EPILOG, formatter_class=fmt, **kw)
        sub.set_defaults(handler=handler)
        return sub

    worker = command(commands, "worker", cmd_worker, "fire due jobs in this process until SIGTERM/SIGINT")
    worker.add_argument(
        "--listeners", help="comma-separated modules to import (default: $SCHEDULE_LISTENER_MODULES)"
    )
    worker.add_argument(
        "--metrics-port",
        type=int,
        help="serve /metrics (Prometheus; needs the prometheus extra), /healthz and /readyz on this port",
    )
    worker.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="address the metrics port binds (default 127.0.0.1; 0.0.0.0 for every interface)",
    )
    health = command(
        commands,
        "health",
        cmd_health,
        "check the store, Redis, live workers and the due backlog (for probes)",
    )
    health.add_argument("--json", action="store_true", help='print {"ok": ..., "checks": [...]}')
    health.add_argument(
        "--min-workers", type=int, default=1, help="live workers required (default 1; 0: none)"
    )
    health.add_argument(
        "--max-backlog-age",
        type=float,
        default=60.0,
        help="seconds the oldest due-but-not-fired job may wait (default 60)",
    )
    reconcile = command(
        commands, "reconcile", cmd_reconcile, "heal the execution substrate from the store once"
    )
    reconcile.add_argument("--json", action="store_true", help="print the report as JSON")
    workers = command(
        commands, "workers", cmd_workers, "list the registered workers, live and dead, with their last beat"
    )
    workers.add_argument("--json", action="store_true", help='print {"workers": [...], "dead_after": N}')
    timer = command(
        commands,
        "timer",
        cmd_timer,
        "run the timer service (every option, --help too, is passed to it)",
        add_help=False,
    )
    timer.add_argument("timer_args", nargs=argparse.REMAINDER, help="arguments for the timer service")

    jobs = command(
        commands, "jobs", None, "list, show, cancel, pause, resume, trigger, requeue and purge jobs"
    )
    job_commands = jobs.add_subparsers(dest="jobs_command", required=True, metavar="COMMAND")
    listing = command(job_commands, "list", cmd_jobs_list, "list jobs, oldest first, a page at a time")
    for option in ("owner-id", "tenant-id", "topic"):
        listing.add_argument(f"--{option}", help=f"only jobs with this {option.replace('-', ' ')}")
    listing.add_argument(
        "--status",
        action="append",
        help="pending|active|paused|completed|cancelled|failed (repeat or comma-list)",
    )
    listing.add_argument(
        "--outcome",
        action="append",
        help="how the last attempt ended: succeeded|failed|unheard|timeout|skipped (repeat or comma-list)",
    )
    listing.add_argument("--limit", type=int, default=20, help="jobs per page, 1-500 (default 20)")
    listing.add_argument("--cursor", help="the next-page cursor printed by the previous page")
    listing.add_argument("--json", action="store_true", help='print {"items": [...], "next_cursor": ...}')
    for name, handler, text in (
        ("show", cmd_jobs_show, 'print one job as JSON, with its latest fires under "history"'),
        ("cancel", cmd_jobs_cancel, "cancel a job (idempotent); prints its id and status"),
    ):
        sub = command(job_commands, name, handler, text)
        sub.add_argument("job_id", metavar="ID")
        if name == "show":
            sub.add_argument("--history", type=int, default=20, help="fires to show, newest first (1-500)")
    for name, text in (
        ("pause", "pause a job (idempotent): it never fires until resumed; prints its id and status"),
        ("resume", "resume a paused job (idempotent); its misfire policy applies to what it missed"),
        ("trigger", "fire a pending job now, as one extra fire; prints its id and status"),
    ):
        command(job_commands, name, cmd_jobs_steer, text).add_argument("job_id", metavar="ID")
    requeue = command(
        job_commands,
        "requeue",
        cmd_jobs_requeue,
        "run finished jobs again: a failed, completed or cancelled one-shot fires now as a new "
        "occurrence, a failed repeating job resumes its schedule; prints each id and status",
    )
    requeue.add_argument("job_ids", metavar="ID", nargs="+", help="one or more job ids")
    purge = command(
        job_commands,
        "purge",
        cmd_jobs_purge,
        "delete finished jobs (completed, cancelled, failed), then the fire history, older than AGE",
    )
    purge.add_argument(
        "--older-than",
        required=True,
        metavar="AGE",
        help="that finished (fired, for the history) longer ago than AGE (30d, 12h, 90m, 45s)",
    )
    purge.add_argument("--batch-size", type=int, default=500, help="rows per transaction (default 500)")

    cron = command(
        commands, "cron", cmd_cron, "print the next fire times of a cron expression in a time zone"
    )
    cron.add_argument("expression", metavar="EXPR", help='a 5-field cron expression, e.g. "30 2 * * *"')
    cron.add_argument("--tz", required=True, help="IANA time zone, e.g. Europe/Berlin")
    cron.add_argument("-n", type=int, default=10, help="how many fire times, 1-1000 (default 10)")
    cron.add_argument("--after", help="start after this ISO 8601 time with an offset (default: now)")
    cron.add_argument("--json", action="store_true", help="print a JSON list of fire times")
    cron.add_argument(
        "--spread",
        type=float,
        metavar="SECONDS",
        help="delay each fire by the spread of --spread-key in this window",
    )
    cron.add_argument(
        "--spread-key", default="", help="what the spread offset is derived from (a job's spread_key)"
    )
    cron.add_argument(
        "--exclude-weekday",
        action="append",
        metavar="DAYS",
        help="weekdays the calendar excludes: 0-6 (Monday 0) or mon..sun, comma-separated; repeatable",
    )
    cron.add_argument(
        "--exclude-date", action="append", metavar="DATE", help="a date the calendar excludes; repeatable"
    )
    cron.add_argument(
        "--holidays", metavar="CC[-SUB]", help="exclude the public holidays of a country, e.g. DE-BY"
    )

    dashboard = command(
        commands,
        "dashboard",
        cmd_dashboard,
        f"serve the web dashboard (read-only unless ${DASHBOARD_TOKEN_ENV} holds an access token)",
    )
    dashboard.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    dashboard.add_argument("--port", type=int, default=8765, help="port (default 8765)")

    cli_schedules.add_commands(commands, command)
    cli_upcoming.add_commands(commands, command)

    db = command(commands, "db", None, "the SDK's database schema")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="COMMAND")
    command(db_commands, "upgrade", cmd_db_upgrade, "create or upgrade the SDK's tables (Alembic migrations)")
    command(db_commands, "current", cmd_db_current, "print the schema revision and the latest one")
    return parser


# -- main ------------------------------------------------------------------------------------------


def _container(args: argparse.Namespace) -> ScheduleContainer | None:
    if args.handler is cmd_cron:  # needs no store: the configured URLs are not checked
        return None
    if args.handler is cmd_timer and {"-h", "--help"} & set(args.timer_args):
        return None  # the timer service's own help: it reads TIMER_* settings, not these URLs
    from schedule_sdk.bootstrap.container import ScheduleContainer

    overrides: dict[str, Any] = {"database_url": args.database_url, "redis_url": args.redis_url}
    if getattr(args, "listeners", None):
        overrides["listener_modules"] = args.listeners
    if getattr(args, "metrics_port", None):
        overrides["metrics"] = "prometheus"
    container = ScheduleContainer()
    container.config.from_dict({k: v for k, v in overrides.items() if v is not None})
    _check_urls(container.settings())
    return container


def _exit_code(error: BaseException) -> int:
    if isinstance(error, UsageError | ScheduleValidationError):
        return USAGE
    if isinstance(error, JobNotFound):
        return NOT_FOUND
    if isinstance(error, ScheduleUnavailable):
        return UNAVAILABLE
    return ERROR


def _refused(error: BaseException) -> bool:
    """A request the SDK refused on purpose (exit 1, but not an unexpected error)."""
    return isinstance(error, JobFinished | NotTriggerable | NotReschedulable | NotRequeueable)


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the command line; return the exit code (it never raises, except SystemExit from --help)."""
    out, err = out or sys.stdout, err or sys.stderr
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if args.command == "timer":  # everything after "timer" belongs to the timer service
            args.timer_args = [*extra, *args.timer_args]
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exit_:  # --help (0) or a usage error (2), already printed by argparse
        return int(exit_.code or 0)
    handler = logging.StreamHandler(err)
    if args.log_format == "json":
        from schedule_sdk.entrypoints.logs import JsonFormatter

        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(
        level=(logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)], handlers=[handler]
    )
    container: ScheduleContainer | None = None
    try:
        container = _container(args)
        return _run(args, container, out, err)
    except Exception as error:
        return _failed(args, error, err)
    finally:
        if container is not None:
            with contextlib.suppress(Exception):
                container.shutdown_resources()


def run_in(
    container: ScheduleContainer, argv: Sequence[str], *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run one command line on an app's own ``container`` (one it built and configured, e.g. the
    Django app's): the same output, errors and exit codes as :func:`main`; the container's
    resources are the caller's to shut down. ``--database-url`` and ``--redis-url`` are ignored:
    the container's settings apply."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error (2), already printed by argparse
        return int(exit_.code or 0)
    try:
        return _run(args, container, out, err)
    except Exception as error:
        return _failed(args, error, err)


def _run(args: argparse.Namespace, container: ScheduleContainer | None, out: TextIO, err: TextIO) -> int:
    try:
        return int(args.handler(Context(args, container, out, err)))
    except KeyboardInterrupt:
        return 130


def _failed(args: argparse.Namespace, error: Exception, err: TextIO) -> int:
    """Print ``error`` as one line on ``err``; its exit code."""
    code = _exit_code(error)
    if args.verbose:
        traceback.print_exception(error, file=err)
    prefix = "unexpected error: " if code == ERROR and not _refused(error) else ""
    err.write(f"schedule-sdk: error: {prefix}{one_line(error)}\n")
    return code
