"""Schedules as code: ``@cron``, ``@every`` and ``@after``, their registry and their sync.

The decorators validate the declaration and *mark* the function; nothing is registered at import
time. A container's :class:`DeclaredSchedules` (``container.declared_schedules()``) binds the
marked functions of the modules named in ``listener_modules`` when it is first built; bind more
with ``register(target, container=app_container)``. Each declared function is the listener of its
schedule (it receives the ``ScheduleArrivedEvent`` of every fire); a method gets its instance from
the provider of its class in ``container`` (a dependency-injector container), at each fire.

:class:`DeclaredSync` brings the store to the declared set: ``plan()`` says what it would do,
``apply()`` does it in one transaction, one process at a time (see docs/explanation/guarantees.md,
"Declared schedules"). A worker applies it when it starts.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any, TypeVar

from schedule_sdk.core.listeners import ListenerRegistry
from schedule_sdk.core.service import cancel_row
from schedule_sdk.core.write_order import write_order
from schedule_sdk.domain.calendars import Calendar
from schedule_sdk.domain.declared import (
    Declaration,
    DeclarationKind,
    Plan,
    PlanItem,
    Step,
    StoredDeclaration,
    describe,
    diff,
    step_changes,
    topic_for,
)
from schedule_sdk.domain.errors import DuplicateDeclaration, InvalidDeclaration, ScheduleError
from schedule_sdk.domain.events import schedule_arrived_event_name
from schedule_sdk.domain.ids import new_id
from schedule_sdk.domain.jobs import (
    ConcurrencyLimit,
    IntervalRepeat,
    JsonObject,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    ScheduledJob,
)
from schedule_sdk.domain.status import OPEN_STATUSES, JobStatus
from schedule_sdk.ports import Clock, DeclaredRows, ExecutionQueue, JobStore, Occurrence

F = TypeVar("F", bound=Callable[..., Any])

logger = logging.getLogger(__name__)

_MARK = "__schedule_sdk_declared__"
_MS = timedelta(milliseconds=1)


# -- the decorators --------------------------------------------------------------------------


def cron(
    expression: str,
    *,
    tz: str = "UTC",
    name: str | None = None,
    topic: str | None = None,
    payload: JsonObject | None = None,
    retry: RetryPolicy | None = None,
    misfire: MisfirePolicy | None = None,
    overlap: OverlapPolicy | None = None,
    concurrency: ConcurrencyLimit | None = None,
    time_limit: timedelta | None = None,
    spread: timedelta | None = None,
    jitter: timedelta | None = None,
    calendar: Calendar | None = None,
) -> Callable[[F], F]:
    """Declare that the decorated function runs on a 5-field cron ``expression`` in zone ``tz``.

    ``name`` is the schedule's stable identity in the store (default: the function's module and
    qualified name); ``topic`` its topic (default: derived from the name). The function receives
    each fire's :class:`~schedule_sdk.ScheduleArrivedEvent`. ``overlap`` is the job's overlap
    policy (``"skip"``, ``"buffer_one"``, ``"allow"``; None: the misfire policy decides).
    ``spread`` delays every fire by the same amount in ``[0, spread)`` derived from the name,
    ``jitter`` by a random amount per fire, and ``calendar`` excludes dates (see
    :class:`~schedule_sdk.RepeatSpec`);
    each is part of the declaration's digest only when given. ``time_limit`` bounds how long the
    listeners of one fire may run (as a spec's ``time_limit``; part of the declared spec, so
    changing it is a change that a sync applies).
    ``concurrency`` limits how many of its fires (and those of other jobs naming the same key)
    run at once.

    :raises InvalidDeclaration: the cron, zone, payload, time limit or a policy is invalid, or
        the function cannot be found again by name (a lambda, a nested function).
    """
    return _declare(
        "cron",
        name,
        topic,
        tz,
        payload,
        retry,
        misfire,
        overlap,
        time_limit,
        concurrency,
        cron=expression,
        **_options(spread, jitter, calendar),
    )


def every(
    interval: timedelta,
    *,
    anchor: datetime | None = None,
    tz: str = "UTC",
    name: str | None = None,
    topic: str | None = None,
    payload: JsonObject | None = None,
    retry: RetryPolicy | None = None,
    misfire: MisfirePolicy | None = None,
    overlap: OverlapPolicy | None = None,
    concurrency: ConcurrencyLimit | None = None,
    time_limit: timedelta | None = None,
    spread: timedelta | None = None,
    jitter: timedelta | None = None,
    calendar: Calendar | None = None,
) -> Callable[[F], F]:
    """Declare that the decorated function runs every ``interval`` (fixed rate), on the grid
    through ``anchor`` (an aware datetime; default: the instant of the first sync), with the
    overlap policy ``overlap``, ``spread``, ``jitter`` and ``calendar`` as for :func:`cron`.

    :raises InvalidDeclaration: ``interval`` is not a positive timedelta of whole milliseconds,
        or anything :func:`cron` refuses.
    """
    every_ms = _milliseconds(interval)
    return _declare(
        "every",
        name,
        topic,
        tz,
        payload,
        retry,
        misfire,
        overlap,
        time_limit,
        concurrency,
        every_ms=every_ms,
        anchor=anchor,
        **_options(spread, jitter, calendar),
    )


def after(
    delay: timedelta,
    *,
    tz: str = "UTC",
    name: str | None = None,
    topic: str | None = None,
    payload: JsonObject | None = None,
    retry: RetryPolicy | None = None,
    misfire: MisfirePolicy | None = None,
    concurrency: ConcurrencyLimit | None = None,
    time_limit: timedelta | None = None,
    spread: timedelta | None = None,
    jitter: timedelta | None = None,
) -> Callable[[F], F]:
    """Declare that the decorated function runs once, ``delay`` after the first sync that
    declares it (the first start of the app). It never runs again, whatever later deploys do.
    ``spread`` and ``jitter`` as for :func:`cron`.

    :raises InvalidDeclaration: ``delay`` is not a timedelta of zero or more whole milliseconds,
        or anything :func:`cron` refuses.
    """
    after_ms = _milliseconds(delay)
    return _declare(
        "after",
        name,
        topic,
        tz,
        payload,
        retry,
        misfire,
        None,
        time_limit,
        concurrency,
        after_ms=after_ms,
        **_options(spread, jitter, None),
    )


def _options(spread: timedelta | None, jitter: timedelta | None, calendar: Calendar | None) -> dict[str, Any]:
    """The optional spread, jitter and calendar keywords that were given (a declaration without
    them keeps its digest)."""
    given = {"spread": spread, "jitter": jitter, "calendar": calendar}
    return {key: value for key, value in given.items() if value is not None}


def _milliseconds(value: object) -> object:
    """``value`` in whole milliseconds, or ``value`` itself when it is no timedelta of whole
    milliseconds (refused when the function is decorated, naming it)."""
    if not isinstance(value, timedelta) or value % _MS != timedelta(0):
        return value
    return value // _MS


def _declare(
    kind: DeclarationKind,
    name: str | None,
    topic: str | None,
    tz: str,
    payload: JsonObject | None,
    retry: RetryPolicy | None,
    misfire: MisfirePolicy | None,
    overlap: OverlapPolicy | None,
    time_limit: timedelta | None,
    concurrency: ConcurrencyLimit | None,
    **timing: Any,
) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        where = _where(fn)
        if not inspect.isfunction(fn):
            raise InvalidDeclaration(where, f"@{kind} decorates a function or a method, not {fn!r}")
        if fn.__name__ == "<lambda>":
            raise InvalidDeclaration(where, f"@{kind} cannot decorate a lambda: it has no name to find it by")
        if "<locals>" in fn.__qualname__:
            raise InvalidDeclaration(
                where, f"@{kind} cannot decorate a nested function: declare it at module or class level"
            )
        for key, value in timing.items():
            if key.endswith("_ms") and (not isinstance(value, int) or isinstance(value, bool)):
                raise InvalidDeclaration(where, f"{key[:-3]} must be a timedelta of whole milliseconds")
        if kind == "every" and timing["every_ms"] <= 0:
            raise InvalidDeclaration(where, "the interval must be positive", "SCHEDULE_INVALID_INTERVAL")
        if kind == "after" and timing["after_ms"] < 0:
            raise InvalidDeclaration(where, "the delay must not be negative", "SCHEDULE_INVALID_INTERVAL")
        schedule_name = where if name is None else name
        try:
            declaration = Declaration(
                name=schedule_name,
                kind=kind,
                topic=topic_for(schedule_name) if topic is None else topic,
                timezone=tz,
                payload=payload,
                retry=retry if retry is not None else RetryPolicy(),
                misfire=misfire if misfire is not None else MisfirePolicy(),
                overlap=overlap,
                concurrency=concurrency,
                time_limit=time_limit,
                **timing,
            )
            if declaration.calendar is not None:  # one that excludes every occurrence is refused now
                now = datetime.now(UTC)
                ScheduledJob.first_of(declaration.spec(now), schedule_name, now, past_allowed=True)
        except ScheduleError as error:
            raise InvalidDeclaration(where, error.message, error.code) from error
        except (TypeError, ValueError) as error:
            raise InvalidDeclaration(where, str(error)) from error
        setattr(fn, _MARK, (*getattr(fn, _MARK, ()), declaration))
        return fn

    return decorate


def _where(fn: object) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def declarations_of(fn: object) -> tuple[Declaration, ...]:
    """The declarations the decorators put on ``fn`` (empty if none)."""
    marked: tuple[Declaration, ...] = getattr(fn, _MARK, ())
    return marked


# -- the registry ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Bound:
    declaration: Declaration
    #: The declared function (what a second registration of the same one is recognised by).
    function: Callable[..., Any]
    listener: Callable[..., Any]


class DeclaredSchedules:
    """The schedules declared in code that one container syncs, and their listeners (connected
    to the container's :class:`~schedule_sdk.core.listeners.ListenerRegistry`)."""

    def __init__(self, listeners: ListenerRegistry) -> None:
        self._listeners = listeners
        self._bound: dict[str, _Bound] = {}
        self._topics: dict[str, str] = {}
        self._lock = threading.Lock()

    @classmethod
    def of_modules(
        cls, modules: Iterable[str | ModuleType] = (), *, listeners: ListenerRegistry
    ) -> DeclaredSchedules:
        """The declared functions of ``modules`` (imported if named). A module whose classes
        declare methods needs a container: register it with :meth:`register` instead.

        :raises InvalidDeclaration: see :meth:`register`.
        """
        schedules = cls(listeners)
        for module in modules:
            schedules.register(module, classes=False)
        return schedules

    def register(self, target: object, *, container: Any = None, classes: bool = True) -> object:
        """Bind the declared schedules of ``target``: a decorated function, a module (or its
        dotted name, imported) with its decorated functions and the decorated methods of its
        classes, a class, or an object (its decorated methods, bound to it). A method of a class
        is called on the instance ``container``'s provider of that class builds (built once now,
        to check it can be, then at each fire: a ``Singleton`` gives the same one, a ``Factory`` a
        new one). Registering the same function twice is harmless.

        :raises DuplicateDeclaration: another function declares the same name or topic.
        :raises InvalidDeclaration: a declared method's class has no provider in ``container``
            (or none was given), or building it failed.
        """
        if isinstance(target, str):
            target = importlib.import_module(target)
        for declaration, function, listener in self._found(target, container, classes):
            self._bind(declaration, function, listener)
        return target

    def declarations(self) -> list[Declaration]:
        """Every bound declaration, ordered by name."""
        with self._lock:
            return [self._bound[n].declaration for n in sorted(self._bound)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._bound)

    def _bind(
        self, declaration: Declaration, function: Callable[..., Any], listener: Callable[..., Any]
    ) -> None:
        with self._lock:
            known = self._bound.get(declaration.name)
            if known is not None:
                if known.function is function and known.declaration == declaration:
                    return
                raise DuplicateDeclaration(
                    _where(function),
                    f"the name {declaration.name!r} is declared by {_where(known.function)} too",
                )
            owner = self._topics.get(declaration.topic)
            if owner is not None:
                raise DuplicateDeclaration(
                    _where(function), f"the topic {declaration.topic!r} is the topic of {owner!r} too"
                )
            self._bound[declaration.name] = _Bound(declaration, function, listener)
            self._topics[declaration.topic] = declaration.name
        self._listeners.connect(schedule_arrived_event_name(declaration.topic), listener)

    def _found(
        self, target: object, container: Any, classes: bool
    ) -> list[tuple[Declaration, Callable[..., Any], Callable[..., Any]]]:
        found: list[tuple[Declaration, Callable[..., Any], Callable[..., Any]]] = []
        if isinstance(target, ModuleType):
            for member in list(vars(target).values()):
                if inspect.isfunction(member) and member.__module__ == target.__name__:
                    found.extend((d, member, member) for d in declarations_of(member))
                elif classes and inspect.isclass(member) and member.__module__ == target.__name__:
                    found.extend(self._found(member, container, classes))
            return found
        if inspect.isfunction(target):
            return [(d, target, target) for d in declarations_of(target)]
        if inspect.isclass(target):
            methods = _declared_methods(target)
            if not methods:
                return []
            provide = _provider_of(target, container, methods[0][0])
            for fn, declaration in methods:
                found.append((declaration, fn, _method_listener(provide, fn.__name__)))
            return found
        for fn, declaration in _declared_methods(type(target)):
            found.append((declaration, fn, getattr(target, fn.__name__)))
        return found


def _declared_methods(cls: type) -> list[tuple[Callable[..., Any], Declaration]]:
    methods: list[tuple[Callable[..., Any], Declaration]] = []
    for klass in reversed(cls.__mro__):
        for member in vars(klass).values():
            if inspect.isfunction(member):
                methods.extend((member, d) for d in declarations_of(member))
    return methods


def _provider_of(cls: type, container: Any, fn: Callable[..., Any]) -> Callable[[], Any]:
    """The provider of ``cls`` in ``container`` (a dependency-injector container), checked by
    building the instance once."""
    where = _where(fn)
    provider = None
    if container is not None and hasattr(container, "traverse"):
        for candidate in container.traverse():
            provides = getattr(candidate, "provides", None)
            if inspect.isclass(provides) and issubclass(provides, cls):
                provider = candidate
                break
    if provider is None:
        raise InvalidDeclaration(
            where,
            f"the container cannot build {cls.__qualname__}: register the class with a container "
            f"that provides it (register({cls.__qualname__}, container=...))",
        )
    try:
        provider()
    except Exception as error:
        raise InvalidDeclaration(
            where, f"the container cannot build {cls.__qualname__}: {error!r}"
        ) from error
    built: Callable[[], Any] = provider
    return built


def _method_listener(provide: Callable[[], Any], method: str) -> Callable[..., Any]:
    def listener(event: Any) -> Any:
        return getattr(provide(), method)(event)

    listener.__qualname__ = f"declared:{method}"
    return listener


# -- the sync ----------------------------------------------------------------------------------


class DeclaredSync:
    """Brings the store's code-owned schedules to the declared set.

    ``version`` orders the code of one app across deploys (the ``declared_version`` setting): a
    declaration stored by a higher version is left alone, so old code started beside new code never
    undoes it. ``prune``: cancel the job of a name the code no longer declares (else keep it).
    """

    def __init__(
        self,
        *,
        store: JobStore,
        rows: DeclaredRows,
        queue: ExecutionQueue,
        clock: Clock,
        schedules: DeclaredSchedules,
        version: int = 0,
        prune: bool = True,
    ) -> None:
        self._store = store
        self._rows = rows
        self._queue = queue
        self._clock = clock
        self.schedules = schedules
        self.version = version
        self.prune = prune

    def plan(self) -> Plan:
        """What :meth:`apply` would do now, writing nothing."""
        pairs = self._rows.read()
        steps = self._diff(pairs)
        jobs = {s.name: j for s, j in pairs}
        now = self._clock.now()
        return Plan(
            version=self.version,
            prune=self.prune,
            items=[
                _item(step, jobs.get(step.name), _Outcome.of(step, jobs.get(step.name), now), applied=False)
                for step in steps
            ],
        )

    def apply(self) -> Plan:
        """Sync in one transaction, after the other processes' syncs (a store lock): add the
        missing schedules, replace the changed ones (their next fire is the new spec's first after
        now), cancel the removed ones (with ``prune``), leave the unchanged ones unwritten.

        :raises StoreUnavailable, QueueUnavailable: nothing was written.
        """
        withdrawn: list[Occurrence] = []
        with write_order(self._store, self._queue) as (tx, hand_off):
            self._rows.lock(tx)
            now = self._clock.now()
            pairs = self._rows.rows(tx)
            steps = self._diff(pairs)
            jobs = {s.name: j for s, j in pairs}
            items: list[PlanItem] = []
            puts: list[StoredDeclaration] = []
            inserts: list[ScheduledJob] = []
            written = 0
            for step in steps:
                old = jobs.get(step.name)
                outcome = _Outcome.of(step, old, now)
                items.append(_item(step, old, outcome, applied=True))
                if step.action in ("unchanged", "keep", "stale"):
                    continue
                if outcome.cancel and old is not None:
                    replaced_by = outcome.job.id if outcome.job is not None else None
                    before = cancel_row(tx, old.id, now, replaced_by=replaced_by)
                    if before is not None:
                        withdrawn.append(Occurrence.of(before))
                    written += 1
                if outcome.job is not None:
                    inserts.append(outcome.job)
                puts.append(self._stored_row(step, old, outcome, now))
            if inserts:
                tx.insert_many(inserts)
                hand_off.enqueue([Occurrence.of(j) for j in inserts if j.status is JobStatus.PENDING])
            self._rows.put(tx, puts)
            written += len(inserts) + len(puts)
        if withdrawn:
            self._queue.withdraw(withdrawn)
        for item in items:  # what this deploy did, once it is committed; nothing for no change
            if item.action in ("add", "change", "remove"):
                logger.info("%s", describe(item))
        return Plan(version=self.version, prune=self.prune, items=items, rows_written=written, applied=True)

    def _diff(self, pairs: Sequence[tuple[StoredDeclaration, ScheduledJob | None]]) -> list[Step]:
        stored = {s.name: s for s, _ in pairs}
        return diff(self.schedules.declarations(), stored, version=self.version, prune=self.prune)

    def _stored_row(
        self, step: Step, old: ScheduledJob | None, outcome: _Outcome, now: datetime
    ) -> StoredDeclaration:
        if step.declared is None:  # removed: a tombstone at this version
            assert step.stored is not None
            return StoredDeclaration(
                name=step.name,
                job_id=step.stored.job_id,
                kind=step.stored.kind,
                fingerprint=step.stored.fingerprint,
                spec=step.stored.spec,
                version=max(self.version, step.stored.version),
                declared=False,
                synced_at=now,
            )
        declared = step.declared
        job_id = outcome.job.id if outcome.job is not None else (old.id if old is not None else "")
        if not job_id and step.stored is not None:
            job_id = step.stored.job_id
        return StoredDeclaration(
            name=step.name,
            job_id=job_id,
            kind=declared.kind,
            fingerprint=declared.fingerprint,
            spec=json.dumps(declared.to_dict(), sort_keys=True),
            version=max(self.version, step.stored.version if step.stored is not None else self.version),
            declared=True,
            synced_at=now,
        )


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What one step writes: the new job (None: none) and whether the old one is cancelled."""

    job: ScheduledJob | None
    cancel: bool

    @classmethod
    def of(cls, step: Step, old: ScheduledJob | None, now: datetime) -> _Outcome:
        open_old = old if old is not None and old.status in OPEN_STATUSES else None
        if step.action == "remove":
            return cls(None, open_old is not None)
        if step.action not in ("add", "change"):
            return cls(None, False)
        declared = step.declared
        assert declared is not None
        if step.action == "change" and declared.kind == "after" and open_old is None and old is not None:
            return cls(None, False)  # an @after that already ran is never run again
        if step.action == "change" and declared.kind == "after" and old is None:
            return cls(None, False)  # ran, and its job was purged
        return cls(_new_job(declared, open_old, now, replaces=old), open_old is not None)


def _new_job(
    declared: Declaration, old: ScheduledJob | None, now: datetime, *, replaces: ScheduledJob | None = None
) -> ScheduledJob:
    """The job of ``declared``; replacing ``old`` (open), its first fire is the new spec's first
    strictly after the later of now and the due instant of a fire in flight; an interval keeps the
    old job's grid unless it declares an anchor; a paused job stays paused. It links back
    (``rescheduled_from``) to ``replaces``, the name's previous job whatever its status, so that
    the schedule's history follows it across deploys (:func:`~schedule_sdk.core.service.lineage`)."""
    switch = now
    if old is not None and old.status is JobStatus.ACTIVE:
        switch = max(now, old.scheduled_for)
    created = old.created_at if old is not None and declared.kind == "after" else now
    if declared.kind == "every" and declared.anchor is None and old is not None:
        if isinstance(old.repeat, IntervalRepeat):
            declared = dataclasses.replace(declared, anchor=old.scheduled_for)
    first = declared.first_after(switch, created)
    job = ScheduledJob.first_of(declared.spec(now), new_id(), now, past_allowed=True)
    job = job.evolve(run_at=job.due_of(first), scheduled_for=first)
    if replaces is not None:
        job = job.evolve(rescheduled_from=replaces.id)
    if old is None:
        return job
    return job.moved(JobStatus.PAUSED, now) if old.status is JobStatus.PAUSED else job


def _item(step: Step, old: ScheduledJob | None, outcome: _Outcome, *, applied: bool) -> PlanItem:
    open_old = old if old is not None and old.status in OPEN_STATUSES else None
    declared = step.declared
    new = outcome.job
    if step.action in ("unchanged", "keep", "stale"):
        after = open_old.run_at if open_old is not None else None
    else:
        after = new.run_at if new is not None else None
    shown = new if new is not None else open_old
    return PlanItem(
        name=step.name,
        action=step.action,
        kind=declared.kind if declared is not None else (step.stored.kind if step.stored else None),
        topic=declared.topic if declared is not None else (old.topic if old is not None else None),
        job_id=new.id if new is not None and applied else (old.id if old is not None else None),
        next_before=open_old.run_at if open_old is not None else None,
        next_after=after,
        paused=shown is not None and shown.status is JobStatus.PAUSED,
        changes=step_changes(step),
    )
