"""``check_health``: is this deployment able to fire jobs on time? For probes and readiness endpoints.

It checks, in order: the job store answers; Redis answers (when ``redis_url`` is set); at least
``min_workers`` registered workers are live (their beat is younger than ``dead_after``); and the
oldest due-but-not-fired job has waited at most ``max_backlog_age`` seconds; and, when the store
keeps operator reads, whether fires of the last hour went unheard (a warning, never a failure: the
jobs moved on). Each check is
reported with a one-line detail; the report is healthy when every check passed. It never raises
for a failing service: a failure is a failed check. ``schedule-sdk health`` prints the same report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.ports import Clock, JobStore, OperatorReads, WorkerRegistry, require


@dataclass(frozen=True, slots=True)
class Check:
    name: str  #: ``store``, ``redis``, ``workers``, ``backlog`` or ``unheard``
    ok: bool
    detail: str
    #: True when the check failed because a backing service could not be reached.
    unavailable: bool = False
    #: Passed, but an operator should look (``unheard``: fires nobody listened to).
    warning: bool = False


@dataclass(frozen=True, slots=True)
class HealthReport:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def unavailable(self) -> bool:
        """A backing service (the store, Redis) could not be reached."""
        return any(c.unavailable for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
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
) -> HealthReport:
    """Run every check (see the module docstring); ``ping_redis`` is called when given. The
    workers are read from ``registry``, by default the store.

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
            ping_redis()
            checks.append(Check("redis", True, "reachable"))
        except Exception as error:
            checks.append(Check("redis", False, f"{type(error).__name__}: {error}", unavailable=True))
    live = [w for w in workers if not is_dead(w, now, dead_after)]
    checks.append(
        Check(
            "workers",
            len(live) >= min_workers,
            f"{len(live)} live of {len(workers)} registered (need {min_workers})",
        )
    )
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
    if isinstance(store, OperatorReads):
        checks.append(_unheard(store, now))
    return HealthReport(checks)


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
    """:func:`check_health` for a :class:`~schedule_sdk.ScheduleContainer` (Redis is pinged when
    ``redis_url`` is set). A readiness endpoint returns 200 when ``report.ok``, else 503."""
    settings = container.settings()
    ping: Callable[[], object] | None = None
    if settings.redis_url:
        import redis

        client = redis.Redis.from_url(settings.redis_url, socket_timeout=2, socket_connect_timeout=2)

        def ping() -> object:
            try:
                return client.ping()
            finally:
                client.close()

    return check_health(
        store=container.store(),
        clock=container.clock(),
        dead_after=settings.dead_after,
        ping_redis=ping,
        min_workers=min_workers,
        max_backlog_age=max_backlog_age,
    )
