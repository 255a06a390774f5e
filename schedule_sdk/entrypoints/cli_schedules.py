"""``schedule-sdk schedules plan|apply|list``: the schedules declared in code, from the CLI.

The declarations are those of ``--listeners`` (else ``$SCHEDULE_LISTENER_MODULES``); with
``--container module:attribute`` the decorated methods of those modules' classes are bound too,
their instances built by that dependency-injector container (a container class is instantiated).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from schedule_sdk.entrypoints.cli_context import Context, UsageError, import_listener_modules

if TYPE_CHECKING:
    from schedule_sdk.domain.declared import Plan, PlanItem

_SIGNS = {"add": "+", "change": "~", "remove": "-", "keep": "=", "unchanged": " ", "stale": "!"}


def _time(value: Any) -> str:
    return "-" if value is None else value.isoformat(timespec="seconds")


def _bind(ctx: Context) -> Any:
    """The container's declared sync, with the methods of ``--container`` bound.

    The modules are imported as ``worker`` imports its listeners: the working directory first on
    the import path, and a module that cannot be imported is a usage error (exit 2)."""
    container = ctx.container
    modules = list(ctx.settings.listener_modules)
    named = getattr(ctx.args, "listeners", None) or ""
    extra = [m for m in filter(None, (m.strip() for m in named.split(","))) if m not in modules]
    import_listener_modules([*modules, *extra])
    schedules = container.declared_schedules()
    for module in extra:  # an app's own container (run_in) was not built with them
        schedules.register(module, classes=False)
        modules.append(module)
    spec = getattr(ctx.args, "app_container", None)
    if spec:
        module_name, _, attribute = spec.partition(":")
        try:
            app: Any = getattr(importlib.import_module(module_name), attribute or "container")
        except (ImportError, AttributeError) as error:
            raise UsageError(f"cannot load container {spec!r}: {error}") from error
        if isinstance(app, type):
            app = app()
        for module in modules:
            schedules.register(module, container=app)
    return container.declared_sync()


def _line(item: PlanItem) -> str:
    sign = _SIGNS[item.action]
    what = f"{item.kind or '?':5} {item.action:9}"
    times = f"next {_time(item.next_after)}"
    if item.action == "change":
        times = f"next {_time(item.next_before)} -> {_time(item.next_after)}"
    elif item.action in ("remove", "stale"):
        owner = " (a newer version owns it)" if item.action == "stale" else ""
        times = f"next {_time(item.next_before)}{owner}"
    paused = " (paused)" if item.paused else ""
    line = f"{sign} {item.name:40} {what} {times}{paused}"
    if item.action == "change":  # what changed, field by field
        line += "".join(f"\n      {change.text()}" for change in item.changes)
    return line


def _show(ctx: Context, plan: Plan) -> None:
    if ctx.args.json:
        import json

        json.dump(plan.to_dict(), ctx.out, indent=2)
        ctx.out.write("\n")
        return
    for item in plan.items:
        ctx.out.write(_line(item) + "\n")
    counts = {a: len(plan.of(a)) for a in ("add", "change", "remove", "stale")}
    verb = "applied" if plan.applied else "plan"
    summary = ", ".join(f"{n} {a}" for a, n in counts.items())
    written = f"; {plan.rows_written} rows written" if plan.applied else ""
    ctx.out.write(f"{verb} (version {plan.version}): {summary}{written}\n")


def cmd_plan(ctx: Context) -> int:
    _show(ctx, _bind(ctx).plan())
    return 0


def cmd_apply(ctx: Context) -> int:
    _show(ctx, _bind(ctx).apply())
    return 0


def cmd_list(ctx: Context) -> int:
    """The stored declared schedules, with their job's status and next fire."""
    rows = ctx.container.declared_rows().read()
    items = [
        {
            "name": stored.name,
            "kind": stored.kind,
            "declared": stored.declared,
            "version": stored.version,
            "job_id": stored.job_id,
            "status": None if job is None else job.status.value,
            "topic": None if job is None else job.topic,
            "next_fire": None
            if job is None or job.status.value in ("completed", "cancelled", "failed")
            else job.run_at.isoformat(),
        }
        for stored, job in rows
    ]
    if ctx.args.json:
        import json

        json.dump({"items": items}, ctx.out, indent=2)
        ctx.out.write("\n")
        return 0
    for item in items:
        state = item["status"] if item["declared"] else "removed"
        ctx.out.write(f"{item['name']}  {item['kind']:5} {state or '-':9} next {item['next_fire'] or '-'}\n")
    ctx.out.write(f"{len(items)} declared schedule(s)\n")
    return 0


def add_commands(commands: Any, command: Any) -> None:
    """Add ``schedules plan|apply|list`` to the CLI's subcommands."""
    schedules = command(commands, "schedules", None, "plan, apply and list the schedules declared in code")
    subs = schedules.add_subparsers(dest="schedules_command", required=True, metavar="COMMAND")
    for name, handler, text in (
        ("plan", cmd_plan, "print what a sync would add, change and remove (writes nothing)"),
        ("apply", cmd_apply, "sync the declared schedules to the store now, and print what it did"),
        ("list", cmd_list, "list the declared schedules in the store with their next fire"),
    ):
        sub = command(subs, name, handler, text)
        sub.add_argument("--json", action="store_true", help="print JSON")
        if name != "list":
            sub.add_argument(
                "--listeners",
                help="comma-separated modules that declare (default: $SCHEDULE_LISTENER_MODULES)",
            )
            sub.add_argument(
                "--container",
                dest="app_container",
                metavar="MODULE:ATTR",
                help="the app's dependency-injector container, for declared methods",
            )
