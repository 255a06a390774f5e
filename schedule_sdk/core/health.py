"""``check_health``: is this deployment able to fire jobs on time? For probes and readiness endpoints.

It checks, in order: the job store answers; Redis answers (when ``redis_url`` is set; a
``maxmemory-policy`` that could evict the SDK's keys is a warning, and so are entries Redis lost
that a worker has not handed over again yet: a flush or a restart without persistence found by the
namespace's missing marker, or a heal under way; the last heal is shown in the detail); at least
``min_workers`` registered workers are live (their beat is younger than ``dead_after``) and may
claim (the clock offset of their last beat, error included, is within ``max_clock_offset``); and the
oldest due-but-not-fired job has waited at most ``max_backlog_age`` seconds; and, when the store
keeps operator reads, whether fires of the last hour went unheard (a warning, never a failure: the
jobs moved on); and whether a live worker has listener threads stuck past a fire's time limit (a
warning: the worker is *degraded*, it keeps firing other jobs on its other threads until
``max_stuck`` are stuck). Each check is
reported with a one-line detail; the report is healthy when every check passed, and degraded
when a check passed with a warning. It never raises
for a failing service: a failure is a failed check. ``schedule-sdk health`` prints the same report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.ports import (
    Clock,
    JobStore,
    OperatorReads,
    WorkerInfo,
    WorkerRegistry,
    provided,
    require,
)


@dataclass(frozen=True, slots=True)
class Check:
    name: str  #: ``store``, ``redis``, ``workers``, ``stuck``, ``backlog`` or ``unheard``
    ok: bool
    detail: str
    #: True when the check failed because a backing service could not be reached.
    unavailable: bool = False
    #: Passed, but an operator should look (``unheard``: fires nobody listened to; ``stuck``:
    #: listener threads stuck past a time limit).
    warning: bool = False


@dataclass(frozen=True, slots=True)
class RedisLook:
    """What a Redis probe found besides an answer: ``warnings`` (ways the SDK's entries could be
    lost, or were and are not healed yet: the check passes, degraded) and ``notes`` (shown in the
    check's detail, e.g. the last loss that was healed)."""

    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class HealthReport:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def degraded(self) -> bool:
        """Every check passed, but one with a warning (stuck listener threads, unheard fires)."""
        return self.ok and any(c.warning for c in self.checks)

    @property
    def unavailable(self) -> bool:
        """A backing service (the store, Redis) could not be reached."""
        return any(c.unavailable for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "degraded": self.degraded,
            "checks": [
                {"name": c.name, "ok": c.ok, "detail": c.detail, "warning": c.warning} for c in self.checks
            ],
        }


def check_health(
    *,
    store: JobStore,
    clock: Clock,
    dead_after: float,
    ping_redis: Callable[[], object] | None = None,
    min_workers: int = 1,
    max_backlog_age: float = 60.0,
    registry: WorkerRegistry | None = None,
    max_clock_offset: float = 5.0,
) -> HealthReport:
    """Run every check (see the module docstring); ``ping_redis`` is called when given: it
    raises when Redis does not answer, and may return a list of lines, each a way its
    configuration could lose the SDK's entries (reported as a warning of the ``redis`` check),
    or a :class:`RedisLook` (warnings, and notes added to the detail).
    The workers are read from ``registry``, by default the store.

    :raises StoreLacksCapability: no ``registry``, and the store is no WorkerRegistry.
    """
    workers_of = registry if registry is not None else require(store, WorkerRegistry, "the health check")
    from schedule_sdk.core.liveness import is_dead

    checks: list[Check] = []
    now = clock.now()
    try:
        backlog = store.backlog(now)
        workers = workers_of.workers()
    except ScheduleError as error:
        return HealthReport([Check("store", False, str(error), unavailable=True)])
    checks.append(Check("store", True, "reachable"))
    if ping_redis is not None:
        try:
            answer = ping_redis()
        except Exception as error:
            checks.append(Check("redis", False, f"{type(error).__name__}: {error}", unavailable=True))
        else:
            notes: list[str] = []
            if isinstance(answer, RedisLook):
                risks, notes = answer.warnings, answer.notes
            else:
                risks = [str(r) for r in answer] if isinstance(answer, list) else []
            detail = "; ".join(["reachable", *risks, *notes])
            checks.append(Check("redis", True, detail, warning=bool(risks)))
    live = [w for w in workers if not is_dead(w, now, dead_after)]
    refusing = [
        w.id
        for w in live
        if w.clock_offset is not None and abs(w.clock_offset) + (w.clock_error or 0.0) > max_clock_offset
    ]
    detail = f"{len(live) - len(refusing)} live of {len(workers)} registered (need {min_workers})"
    if refusing:
        detail += (
            f"; {len(refusing)} more claim nothing, their clock off the store's by more than "
            f"{max_clock_offset:g}s: {', '.join(refusing[:5])}"
        )
    checks.append(Check("workers", len(live) - len(refusing) >= min_workers, detail))
    checks.append(_stuck(live))
    oldest = min((b.oldest_due for b in backlog if b.oldest_due is not None), default=None)
    age = 0.0 if oldest is None else max(0.0, (now - oldest).total_seconds())
    due = sum(b.due for b in backlog)
    checks.append(
        Check(
            "backlog",
            age <= max_backlog_age,
            f"{due} due but not fired, oldest waiting {age:.1f}s (limit {max_backlog_age:g}s)",
        )
    )
    reads = provided(store, OperatorReads)
    if reads is not None:
        checks.append(_unheard(reads, now))
    return HealthReport(checks)


def _stuck(live: list[WorkerInfo]) -> Check:
    """The ``stuck`` line: live workers with listener threads stuck past a fire's time limit."""
    stuck = [w for w in live if w.stuck]
    if not stuck:
        return Check("stuck", True, "no listener thread is stuck past a time limit")
    named = ", ".join(f"{w.id} ({w.stuck})" for w in stuck[:5]) + (", ..." if len(stuck) > 5 else "")
    return Check(
        "stuck",
        True,
        f"degraded: {sum(w.stuck for w in stuck)} listener thread(s) stuck past a time limit on "
        f"{len(stuck)} worker(s): {named}",
        warning=True,
    )


def _unheard(reads: OperatorReads, now: datetime) -> Check:
    """The ``unheard`` line: fires of the last hour that no listener heard, by topic."""
    try:
        topics = reads.unheard(now, 60)
    except ScheduleError as error:
        return Check("unheard", False, str(error), unavailable=True)
    if not topics:
        return Check("unheard", True, "every fire of the last hour was heard")
    named = ", ".join(f"{topic} ({n})" for topic, n in topics[:5]) + (", ..." if len(topics) > 5 else "")
    total = sum(n for _, n in topics)
    return Check("unheard", True, f"{total} fire(s) in the last hour had no listener: {named}", warning=True)


def container_health(container: Any, *, min_workers: int = 1, max_backlog_age: float = 60.0) -> HealthReport:
    """:func:`check_health` for a :class:`~schedule_sdk.ScheduleContainer` (Redis, or the primary
    Sentinel names, is pinged and its eviction policy read when ``redis_url`` is set). A
    readiness endpoint returns 200 when ``report.ok``, else 503."""
    settings = container.settings()
    store_time = container.store_time()
    try:
        store_time.measure()  # beats are stamped by the store's clock: judge them by it
    except ScheduleError:
        pass  # the store check reports it
    return check_health(
        store=container.store(),
        clock=store_time,
        dead_after=settings.dead_after,
        ping_redis=container.redis_probe() if settings.redis_url else None,
        min_workers=min_workers,
        max_backlog_age=max_backlog_age,
        max_clock_offset=settings.max_clock_offset,
    )
