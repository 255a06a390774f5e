"""Schedules declared in code: what a declaration is, what the store keeps of it, and the diff.

A :class:`Declaration` is what ``@cron`` / ``@every`` / ``@after`` say about one function: a
stable ``name``, the timing, the payload and the policies. The store keeps one
:class:`StoredDeclaration` per name (the ``schedule_declared`` table): the job it owns, the
fingerprint of the spec that job was made from, and the version of the code that wrote it. A
sync compares the two (:func:`diff`) and brings the store to the code.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from schedule_sdk.domain import timing
from schedule_sdk.domain.calendars import Calendar
from schedule_sdk.domain.errors import InvalidCalendar
from schedule_sdk.domain.jobs import (
    FIRE_ONCE,
    NO_RETRY,
    ConcurrencyLimit,
    CronRepeat,
    IntervalRepeat,
    JsonObject,
    MisfirePolicy,
    OneShotSpec,
    OverlapPolicy,
    RepeatSpec,
    RetryPolicy,
    encode_json,
    spread_ms,
    validate_topic,
)

DeclarationKind = Literal["cron", "every", "after"]
#: What a sync does with one name: ``add`` (a new job), ``change`` (the job replaced by one of
#: the new spec), ``remove`` (the job cancelled: the code no longer declares it), ``keep`` (not
#: declared, kept by the ``keep`` policy), ``unchanged`` (nothing written), ``stale`` (the store
#: holds a newer version's declaration: this code leaves it alone).
PlanAction = Literal["add", "change", "remove", "keep", "unchanged", "stale"]

MAX_NAME_LENGTH = 255
_NOT_TOPIC = re.compile(r"[^A-Za-z0-9]+")


def topic_for(name: str) -> str:
    """The default topic of a declared schedule: its name with every run of characters a topic
    cannot hold replaced by one separator (``.``, ``_`` or ``-``)."""

    def separator(match: re.Match[str]) -> str:
        first = match.group(0)[0]
        return first if first in "._-" else "-"

    return _NOT_TOPIC.sub(separator, name).strip("._-")[:200].rstrip("._-")


@dataclass(frozen=True, kw_only=True, slots=True)
class Declaration:
    """One schedule declared in code. Built (and validated) by the decorators."""

    name: str
    kind: DeclarationKind
    topic: str
    #: The zone the cron is evaluated in, and every fire shown in.
    timezone: str = "UTC"
    cron: str | None = None
    every_ms: int | None = None
    #: ``every`` only: the fixed-rate grid passes through this instant (None: the first sync).
    anchor: datetime | None = None
    after_ms: int | None = None
    payload: JsonObject | None = None
    retry: RetryPolicy = NO_RETRY
    misfire: MisfirePolicy = FIRE_ONCE
    #: The concurrency key and limit of its fires (None: none).
    concurrency: ConcurrencyLimit | None = None
    #: ``cron`` and ``every`` only: the overlap policy (None: the misfire policy decides).
    overlap: OverlapPolicy | None = None
    #: How long the listeners of one fire may run (None: the worker's default for the topic).
    time_limit: timedelta | None = None
    #: The spread window: every fire is delayed by the same amount in ``[0, spread)``, derived
    #: from ``name`` (so it is the same across syncs and deploys).
    spread: timedelta | None = None
    #: A random delay in ``[0, jitter)`` per fire.
    jitter: timedelta | None = None
    #: Dates on which no fire happens (``cron`` and ``every`` only).
    calendar: Calendar | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or len(self.name) > MAX_NAME_LENGTH:
            raise ValueError(f"name must be a non-empty string of at most {MAX_NAME_LENGTH} characters")
        if "\x00" in self.name:
            raise ValueError("name must not contain NUL")
        validate_topic(self.topic)
        timing.zone(self.timezone)
        if self.anchor is not None:
            object.__setattr__(self, "anchor", timing.ensure_aware(self.anchor, "anchor"))
        # building the spec runs every check of a spec (cron, interval, payload, policies)
        self.spec(datetime(2000, 1, 1, tzinfo=timing.zone("UTC")))

    def to_dict(self) -> dict[str, Any]:
        """The declaration as JSON-ready data; two declarations with equal dicts are the same spec.
        The options added after the first release are there only when set (so declarations
        without them keep their digest)."""
        return {
            "kind": self.kind,
            "topic": self.topic,
            "timezone": self.timezone,
            "cron": self.cron,
            "every_ms": self.every_ms,
            "anchor": None if self.anchor is None else self.anchor.isoformat(),
            "after_ms": self.after_ms,
            "payload": None if self.payload is None else json.loads(encode_json(self.payload)),
            "retry": self.retry.to_dict(),
            "misfire": self.misfire.to_dict(),
            # only when set: the digests of schedules declared without one stay as they were
            **({} if self.overlap is None else {"overlap": self.overlap}),
            # only when set: a declaration without them keeps the digest it had before they existed
            **({} if self.concurrency is None else {"concurrency": self.concurrency.to_dict()}),
            **(
                {}
                if self.time_limit is None
                else {"time_limit_ms": self.time_limit // timedelta(milliseconds=1)}
            ),
            **({} if self.spread is None else {"spread_ms": spread_ms(self.spread)}),
            **({} if self.jitter is None else {"jitter_ms": spread_ms(self.jitter, "jitter")}),
            **({} if self.calendar is None else {"calendar": self.calendar.to_dict()}),
        }

    @property
    def fingerprint(self) -> str:
        """A digest of :meth:`to_dict`: what a sync compares to decide "changed"."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def spec(self, now: datetime) -> OneShotSpec | RepeatSpec:
        """The job spec of this declaration for a job created at ``now``."""
        if self.kind == "after":
            assert self.after_ms is not None
            if self.calendar is not None:
                raise InvalidCalendar("an @after declaration runs once: it takes no calendar")
            return OneShotSpec(
                topic=self.topic,
                run_at=now + timedelta(milliseconds=self.after_ms),
                timezone=self.timezone,
                payload=self.payload,
                retry=self.retry,
                misfire=self.misfire,
                concurrency=self.concurrency,
                overlap=self.overlap,
                time_limit=self.time_limit,
                spread=self.spread,
                spread_key=None if self.spread is None else self.name,
                jitter=self.jitter,
            )
        repeat: CronRepeat | IntervalRepeat
        if self.kind == "cron":
            assert self.cron is not None
            repeat = CronRepeat(expression=self.cron, timezone=self.timezone)
        else:
            assert self.every_ms is not None
            repeat = IntervalRepeat(every_ms=self.every_ms)
        return RepeatSpec(
            topic=self.topic,
            timezone=self.timezone,
            repeat=repeat,
            payload=self.payload,
            retry=self.retry,
            misfire=self.misfire,
            concurrency=self.concurrency,
            overlap=self.overlap,
            time_limit=self.time_limit,
            spread=self.spread,
            spread_key=None if self.spread is None else self.name,
            jitter=self.jitter,
            calendar=self.calendar,
        )

    def first_after(self, after: datetime, created: datetime) -> datetime:
        """The first due instant of this declaration strictly after ``after`` (an ``every`` on
        its anchor's grid, else on the grid through ``after``; an ``after`` at ``created`` plus
        its delay, but never before ``after``)."""
        if self.kind == "cron":
            assert self.cron is not None
            return timing.next_cron_time(self.cron, self.timezone, after)
        if self.kind == "every":
            assert self.every_ms is not None
            return timing.next_interval_time(self.anchor or after, self.every_ms, after)
        assert self.after_ms is not None
        return max(created + timedelta(milliseconds=self.after_ms), after)


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredDeclaration:
    """What the store keeps of a declared schedule (one per name)."""

    name: str
    #: The code-owned job (for a removed one, the job that was cancelled).
    job_id: str
    kind: DeclarationKind
    fingerprint: str
    #: :meth:`Declaration.to_dict` as JSON text, for ``plan`` to show what was declared.
    spec: str
    #: The version of the declarations that wrote this row (see :func:`diff`).
    version: int
    #: False once the code stopped declaring it and the sync cancelled its job (a tombstone:
    #: older code running side by side cannot bring it back).
    declared: bool = True
    synced_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One name's decision in a sync: what to do, from what (stored) to what (declared)."""

    name: str
    action: PlanAction
    declared: Declaration | None = None
    stored: StoredDeclaration | None = None


def diff(
    declared: Sequence[Declaration],
    stored: Mapping[str, StoredDeclaration],
    *,
    version: int,
    prune: bool,
) -> list[Step]:
    """What a sync of ``declared`` (code at ``version``) does to ``stored``, by name.

    The newest declaration wins: a stored row written by a higher version is ``stale`` for this
    code and left alone (old code started beside new code during a rolling deploy never undoes
    it), and so is a name this code would add while the store holds any row of a higher version
    (newer code does not declare it); at the same or a lower version the code wins. A name the
    code no longer declares is ``remove`` (with ``prune``) or ``keep``. Ordered by name.
    """
    steps: list[Step] = []
    names = {d.name: d for d in declared}
    newest = max((s.version for s in stored.values()), default=version)
    for name in sorted(set(names) | set(stored)):
        want, have = names.get(name), stored.get(name)
        if (
            have is not None
            and have.version > version
            and (want is None or want.fingerprint != have.fingerprint or not have.declared)
        ):
            steps.append(Step(name=name, action="stale", declared=want, stored=have))
        elif want is None:
            assert have is not None
            if not have.declared:
                continue  # already removed
            steps.append(Step(name=name, action="remove" if prune else "keep", stored=have))
        elif have is None or not have.declared:
            action: PlanAction = "stale" if newest > version else "add"
            steps.append(Step(name=name, action=action, declared=want, stored=have))
        elif have.fingerprint != want.fingerprint:
            steps.append(Step(name=name, action="change", declared=want, stored=have))
        else:
            steps.append(Step(name=name, action="unchanged", declared=want, stored=have))
    return steps


#: The fields of a declaration a plan compares, in the order it shows them, with their labels.
_FIELDS = (
    ("kind", "kind"),
    ("cron", "cron"),
    ("every_ms", "interval"),
    ("after_ms", "delay"),
    ("anchor", "anchor"),
    ("timezone", "zone"),
    ("topic", "topic"),
    ("payload", "payload"),
    ("retry", "retry"),
    ("misfire", "misfire"),
    ("overlap", "overlap"),
    ("concurrency", "concurrency"),
    ("time_limit_ms", "time limit"),
    ("spread_ms", "spread"),
    ("jitter_ms", "jitter"),
    ("calendar", "calendar"),
)
_DURATIONS = {"every_ms", "after_ms", "time_limit_ms", "spread_ms", "jitter_ms"}


@dataclass(frozen=True, kw_only=True, slots=True)
class FieldChange:
    """One field of a declaration that a sync changes: its label (``cron``, ``interval``,
    ``zone``, ``payload``, a policy...), the value stored before and the value declared now
    (None: not set; a removed declaration has no ``after``, an added one no ``before``)."""

    field: str
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "before": self.before, "after": self.after}

    def text(self) -> str:
        """``cron '*/1 * * * *' → '*/5 * * * *'``, ``zone UTC → Europe/Paris``."""
        return f"{self.field} {_value(self.field, self.before)} \u2192 {_value(self.field, self.after)}"


def _value(label: str, value: Any) -> str:
    if value is None:
        return "-"
    if label == "cron":
        return repr(value)
    if label in {dict(_FIELDS)[k] for k in _DURATIONS} and isinstance(value, int):
        return _duration(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _duration(ms: int) -> str:
    """``700ms``, ``1.1s``, ``5m``, ``2h``, ``1d``: the shortest exact unit."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    if ms >= 1000:
        return f"{ms / 1000:g}s"
    return f"{ms}ms"


def spec_fields(spec: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """A declaration's fields from :meth:`Declaration.to_dict` or the JSON text a
    :class:`StoredDeclaration` keeps of it (empty when there is none or it cannot be read)."""
    if spec is None or isinstance(spec, Mapping):
        return dict(spec or {})
    try:
        loaded = json.loads(spec) if spec else {}
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def field_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """The fields that differ between two declarations' :meth:`Declaration.to_dict` (or
    :func:`spec_fields`) data, in the order of :data:`_FIELDS`; an empty side shows every field
    the other one sets."""
    changes = []
    for key, label in _FIELDS:
        old, new = before.get(key), after.get(key)
        if old != new:
            changes.append(FieldChange(field=label, before=old, after=new))
    return tuple(changes)


def step_changes(step: Step) -> tuple[FieldChange, ...]:
    """What ``step`` changes in its declaration: for ``change`` the differing fields, for
    ``add`` every field it sets, for ``remove`` every field it had; none otherwise."""
    if step.action not in ("add", "change", "remove"):
        return ()
    stored = spec_fields(step.stored.spec) if step.stored is not None and step.action != "add" else {}
    declared = step.declared.to_dict() if step.declared is not None else {}
    return field_changes(stored, declared)


def describe(item: PlanItem) -> str:
    """One line for a log or a plan: ``schedule reports.daily changed: cron '*/1 * * * *' →
    '*/5 * * * *', zone UTC → Europe/Paris``; an added one says what it declares, a removed
    one which job was cancelled."""
    verb = {"add": "added", "change": "changed", "remove": "removed"}.get(item.action, item.action)
    if item.action == "add":
        shown = ("cron", "interval", "delay", "zone", "payload")
        fields = ", ".join(f"{c.field} {_value(c.field, c.after)}" for c in item.changes if c.field in shown)
        what = fields or str(item.kind)
    elif item.action == "remove":
        what = f"job {item.job_id} cancelled" if item.job_id else "no open job"
    else:
        what = ", ".join(c.text() for c in item.changes) or "no field differs"
    job = f" (job {item.job_id})" if item.job_id and item.action != "remove" else ""
    return f"schedule {item.name} {verb}: {what}{job}"


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanItem:
    """One line of a plan: a name, what the sync does to it, and the next fire before and after."""

    name: str
    action: PlanAction
    kind: DeclarationKind | None
    topic: str | None
    job_id: str | None
    #: The next fire of the stored job (None: none, or no job).
    next_before: datetime | None
    #: The next fire once the sync is applied (None: none).
    next_after: datetime | None
    paused: bool = False
    #: The fields the sync changes (see :func:`step_changes`).
    changes: tuple[FieldChange, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "kind": self.kind,
            "topic": self.topic,
            "job_id": self.job_id,
            "next_before": None if self.next_before is None else self.next_before.isoformat(),
            "next_after": None if self.next_after is None else self.next_after.isoformat(),
            "paused": self.paused,
            "changes": [c.to_dict() for c in self.changes],
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """What a sync does (``plan``) or did (``apply``), one item per name, ordered by name."""

    version: int
    prune: bool
    items: list[PlanItem] = field(default_factory=list)
    #: ``apply`` only: job rows and declaration rows written (0 for a plan or a no-op sync).
    rows_written: int = 0
    applied: bool = False

    def of(self, *actions: PlanAction) -> list[PlanItem]:
        return [i for i in self.items if i.action in actions]

    @property
    def added(self) -> list[PlanItem]:
        return self.of("add")

    @property
    def changed(self) -> list[PlanItem]:
        return self.of("change")

    @property
    def removed(self) -> list[PlanItem]:
        return self.of("remove")

    @property
    def has_changes(self) -> bool:
        """Whether applying it writes anything."""
        return bool(self.of("add", "change", "remove"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "prune": self.prune,
            "applied": self.applied,
            "rows_written": self.rows_written,
            "items": [i.to_dict() for i in self.items],
        }
