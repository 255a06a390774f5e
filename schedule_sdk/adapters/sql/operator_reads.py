"""The operator's reads that go beyond the job store's own (:class:`~schedule_sdk.ports.OperatorReads`):
aggregates over the fire history and capped counts, as SQL on the SQL job store's engine.

Every statement is served by an index and reads a bounded number of rows: plots sum the
per-minute summary of the fire history (``schedule_fire_minutes``, ``schedule_fire_failures``:
at most 1,440 x 22 rows a day, however many fires) and never read the entries; the workers page
reads one hour of entries (``ix_schedule_fires_fired``); counts stop at
:data:`~schedule_sdk.domain.overview.COUNT_CAP`; timer tenants are found by a loose index scan of
the primary key. Nothing here loads every row of a table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from schedule_sdk.adapters.sql.engine import translate_errors
from schedule_sdk.adapters.sql.fire_minutes import minute_of
from schedule_sdk.adapters.sql.rows import from_row
from schedule_sdk.adapters.sql.tables import FINISHED_CONDITION, NOT_PENDING_CONDITION
from schedule_sdk.adapters.sql.tables import schedule_fire_failures as fire_failures
from schedule_sdk.adapters.sql.tables import schedule_fire_minutes as fire_minutes
from schedule_sdk.adapters.sql.tables import schedule_fires as fires
from schedule_sdk.adapters.sql.tables import schedule_jobs as jobs
from schedule_sdk.adapters.sql.timers import entry_from_row
from schedule_sdk.adapters.sql.timers import timer_schedules as timers
from schedule_sdk.domain.jobs import ScheduledJob, encode_json
from schedule_sdk.domain.overview import (
    COUNT_CAP,
    SEARCH_WINDOW,
    WINDOWS,
    Bucket,
    JobSearch,
    Overview,
    SeenWorker,
    percentile_bound,
)
from schedule_sdk.domain.status import FINISHED_STATUSES, JobStatus
from schedule_sdk.domain.text import holds_storable_text
from schedule_sdk.domain.timers import TimerEntry, TimerState
from schedule_sdk.ports import OperatorReads

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SQLOperatorReads(OperatorReads):
    """:class:`~schedule_sdk.ports.OperatorReads` as SQL on ``engine`` (SQLite or PostgreSQL): the
    SQL job store composes it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _rows(self, statement: sa.Executable, **params: Any) -> list[tuple[Any, ...]]:
        with translate_errors(), self.engine.connect() as conn:
            return [tuple(row) for row in conn.execute(statement, params)]

    # -- counts ---------------------------------------------------------------------------------

    def count_jobs(self, status: JobStatus | None = None, **equal: str | None) -> int:
        """Jobs matching the filters, counted up to :data:`COUNT_CAP` (+1 to tell "more")."""
        if not all(holds_storable_text(value) for value in equal.values()):
            return 0  # text no row can hold matches none (never sent to the store)
        inner = sa.select(sa.literal(1)).select_from(jobs)
        if status is not None:
            inner = inner.where(jobs.c.status == status.value)
            if status is not JobStatus.PENDING:  # the partial status index's condition, verbatim
                inner = inner.where(sa.text(NOT_PENDING_CONDITION))
        for column, value in equal.items():
            if value is not None:
                inner = inner.where(jobs.c[column] == value)
        capped = inner.limit(COUNT_CAP + 1).subquery()
        return int(self._rows(sa.select(sa.func.count()).select_from(capped))[0][0])

    def status_counts(self) -> dict[JobStatus, int]:
        return {status: self.count_jobs(status) for status in JobStatus}

    # -- overview -------------------------------------------------------------------------------

    def overview(self, now: datetime, minutes: int = 60) -> Overview:
        """Fires per bucket, lateness p50/p99 per bucket and failures by topic in the window of
        ``minutes`` (60, 360 or 1440) ending at ``now``, from the per-minute summary: the window
        is made of whole buckets, from the one holding ``now - minutes`` to the one holding
        ``now`` (skipped occurrences are not fires)."""
        step = WINDOWS[minutes]
        width = step // timedelta(minutes=1)
        since = _floor(now - timedelta(minutes=minutes), step)
        first, last = minute_of(since), minute_of(now)
        summary = fire_minutes.c
        bucket = (summary.minute // width).label("bucket")
        grouped = (
            sa.select(
                bucket,
                summary.lateness_class,
                sa.func.sum(summary.succeeded + summary.failed),
                sa.func.sum(summary.failed),
            )
            .where(summary.minute >= first, summary.minute <= last)
            .group_by(bucket, summary.lateness_class)
        )
        counts: dict[int, dict[int, int]] = defaultdict(dict)
        failures: dict[int, int] = defaultdict(int)
        for number, cls, n, bad in self._rows(grouped):
            if n:
                counts[int(number)][int(cls)] = int(n)
            failures[int(number)] += int(bad or 0)
        failed = sa.func.sum(fire_failures.c.failed).label("n")
        by_topic = (
            sa.select(fire_failures.c.topic, failed)
            .where(fire_failures.c.minute >= first, fire_failures.c.minute <= last)
            .group_by(fire_failures.c.topic)
            .order_by(sa.desc("n"), fire_failures.c.topic)
            .limit(12)
        )
        topics = [(str(topic), int(n)) for topic, n in self._rows(by_topic) if n]
        buckets: list[Bucket] = []
        start = since
        while start <= now:
            number = minute_of(start) // width
            classes = counts.get(number, {})
            total = sum(classes.values())
            buckets.append(
                Bucket(
                    start=start,
                    fires=total,
                    failures=failures.get(number, 0),
                    p50_ms=percentile_bound(classes, total, 0.50),
                    p99_ms=percentile_bound(classes, total, 0.99),
                )
            )
            start += step
        return Overview(
            buckets=buckets,
            failures_by_topic=topics,
            total_fires=sum(b.fires for b in buckets),
            total_failures=sum(b.failures for b in buckets),
            since=since,
            until=now,
        )

    def unheard(self, now: datetime, minutes: int = 60) -> list[tuple[str, int]]:
        """Unheard fires by topic in the window, from the entries (``ix_schedule_fires_fired``
        covers the statement: it reads index entries of the window only)."""
        since = now - timedelta(minutes=minutes)
        n = sa.func.count().label("n")
        statement = (
            sa.select(fires.c.topic, n)
            .where(fires.c.fired_at >= since, fires.c.outcome == sa.literal_column("'unheard'"))
            .group_by(fires.c.topic)
            .order_by(sa.desc("n"), fires.c.topic)
            .limit(20)
        )
        return [(str(topic), int(count)) for topic, count in self._rows(statement)]

    # -- workers --------------------------------------------------------------------------------

    def workers_seen(self, now: datetime, minutes: int = 60) -> list[SeenWorker]:
        """Workers that fired in the last ``minutes`` or hold a claim now, most recent first."""
        since = now - timedelta(minutes=minutes)
        seen = (
            sa.select(fires.c.worker_id, sa.func.max(fires.c.fired_at), sa.func.count())
            .where(fires.c.fired_at >= since, fires.c.worker_id.is_not(None))
            .group_by(fires.c.worker_id)
        )
        active = jobs.c.status == sa.literal_column("'active'")
        holding = (
            sa.select(jobs.c.claimed_by, sa.func.count())
            .where(active, jobs.c.claimed_until.is_not(None))
            .group_by(jobs.c.claimed_by)
        )
        found: dict[str, SeenWorker] = {}
        for worker, last, n in self._rows(seen):  # max() keeps the column's type: an aware datetime
            found[worker] = SeenWorker(worker, last, int(n), 0)
        for worker, n in self._rows(holding):
            if worker is None:
                continue
            old = found.get(worker, SeenWorker(worker, None, 0, 0))
            found[worker] = SeenWorker(worker, old.last_fire, old.fires, int(n))
        return sorted(found.values(), key=lambda w: w.last_fire or _NEVER, reverse=True)

    # -- timers ---------------------------------------------------------------------------------

    def timer_tenants(self, limit: int = 50, after: str | None = None) -> list[str]:
        """Up to ``limit`` tenants with timers, in order: one index seek each (a loose scan)."""
        if not holds_storable_text(after):
            return []
        found: list[str] = []
        last = after
        while len(found) < limit:
            statement = sa.select(sa.func.min(timers.c.tenant_id))
            if last is not None:
                statement = statement.where(timers.c.tenant_id > last)
            value = self._rows(statement)[0][0]
            if value is None:
                break
            found.append(str(value))
            last = str(value)
        return found

    def timers(
        self,
        tenant_id: str,
        state: TimerState,
        limit: int,
        after: tuple[datetime, str] | None = None,
    ) -> list[TimerEntry]:
        """One tenant's timers in one state by due time, keyset-paged on (due_at, service_call_id)."""
        if not holds_storable_text(tenant_id) or (after is not None and not holds_storable_text(after[1])):
            return []  # text no row can hold matches none (never sent to the store)
        statement = (
            sa.select(timers)
            .where(timers.c.tenant_id == tenant_id, timers.c.state == state.value)
            .order_by(timers.c.due_at, timers.c.service_call_id)
            .limit(limit)
        )
        if after is not None:
            due, call = after
            statement = statement.where(
                sa.or_(
                    timers.c.due_at > due,
                    sa.and_(timers.c.due_at == due, timers.c.service_call_id > call),
                )
            )
        with translate_errors(), self.engine.connect() as conn:
            return [entry_from_row(r) for r in conn.execute(statement).mappings()]

    # -- the jobs list ------------------------------------------------------------------------

    def search_jobs(self, search: JobSearch) -> list[ScheduledJob]:
        with translate_errors(), self.engine.connect() as conn:
            return [from_row(r) for r in conn.execute(search_statement(search)).mappings()]

    def count_search(self, search: JobSearch) -> int:
        # counted through the filters' indexes (the status index), not the one that orders the page
        conditions = _search_conditions(replace(search, sort="created"))
        if search.text is not None:
            window = sa.select(jobs.c.id, jobs.c.payload, jobs.c.last_error).where(*conditions)
            candidates = window.order_by(jobs.c.id.desc()).limit(SEARCH_WINDOW).subquery()
            inner = sa.select(sa.literal(1)).select_from(candidates)
            inner = inner.where(_text_condition(search.text, candidates.c))
        else:
            inner = sa.select(sa.literal(1)).select_from(jobs).where(*conditions)
        capped = inner.limit(COUNT_CAP + 1).subquery()
        return int(self._rows(sa.select(sa.func.count()).select_from(capped))[0][0])

    def count_timers(self, tenant_id: str, state: TimerState) -> int:
        if not holds_storable_text(tenant_id):
            return 0
        inner = (
            sa.select(sa.literal(1))
            .select_from(timers)
            .where(timers.c.tenant_id == tenant_id, timers.c.state == state.value)
            .limit(COUNT_CAP + 1)
            .subquery()
        )
        return int(self._rows(sa.select(sa.func.count()).select_from(inner))[0][0])


_NEVER = datetime.min.replace(tzinfo=UTC)
_SORT_COLUMNS = {"created": jobs.c.id, "due": jobs.c.run_at, "updated": jobs.c.updated_at}


def _search_conditions(search: JobSearch) -> list[sa.ColumnElement[bool] | sa.TextClause]:
    """The equality filters of ``search`` (each one an index serves), not its text."""
    conditions: list[sa.ColumnElement[bool] | sa.TextClause] = []
    by_time = search.sort != "created" and _indexed_order(search)
    if search.statuses == frozenset({JobStatus.PENDING}):  # a literal: the delay index's condition
        conditions.append(jobs.c.status == sa.literal_column("'pending'"))
    elif search.statuses:
        conditions.append(jobs.c.status.in_(sorted(s.value for s in search.statuses)))
        if by_time:  # the retention index's condition, verbatim: it orders by update time
            conditions.append(sa.text(FINISHED_CONDITION))
        elif JobStatus.PENDING not in search.statuses:  # the partial status index's condition
            conditions.append(sa.text(NOT_PENDING_CONDITION))
    for column, value in (
        ("topic", search.topic),
        ("owner_id", search.owner_id),
        ("tenant_id", search.tenant_id),
    ):
        if value is not None:
            conditions.append(jobs.c[column] == value)
    if search.tenants is not None:
        conditions.append(jobs.c.tenant_id.in_(sorted(search.tenants)) if search.tenants else sa.false())
    if search.outcomes:
        conditions.append(jobs.c.last_outcome.in_(sorted(o.value for o in search.outcomes)))
    return conditions


def _indexed_order(search: JobSearch) -> bool:
    """Whether an index returns the rows in ``search``'s order (so the page reads only its rows):
    creation order is the id's; due time is the pending rows' delay index; update time is the
    finished rows' retention index."""
    if search.sort == "created":
        return True
    if search.sort == "due":
        return search.statuses == frozenset({JobStatus.PENDING})
    return bool(search.statuses) and search.statuses <= FINISHED_STATUSES


def _text_condition(text: str, row: Any = jobs.c) -> sa.ColumnElement[bool]:
    """The job's payload (as it is stored: JSON-escaped, so a quote or a backslash in the search
    matches the same character in a value), its last error, or the error or traceback of its
    latest fire holds ``text`` (``row`` has the job's ``id``, ``payload`` and ``last_error``).

    The latest fire is one seek of ``ix_schedule_fires_job`` (job id, fired_at) per candidate
    row: the history is never scanned."""
    entry = fires.alias("latest_fire")
    latest = (
        sa.select(entry.c.id)
        .where(entry.c.job_id == row.id)
        .order_by(entry.c.fired_at.desc())
        .limit(1)
        .correlate_except(entry)
        .scalar_subquery()
    )
    said = _like(text)
    fire_said = sa.select(sa.literal(1)).where(
        fires.c.id == latest, sa.or_(said(fires.c.error), said(fires.c.traceback))
    )
    return sa.or_(_like(encode_json(text)[1:-1])(row.payload), said(row.last_error), fire_said.exists())


def _like(text: str) -> Callable[[sa.ColumnElement[Any]], sa.ColumnElement[bool]]:
    """A condition "the column holds ``text``", with ``%``, ``_`` and ``\\`` literal."""
    pattern = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return lambda column: column.like(f"%{pattern}%", escape="\\")


def _keyset(search: JobSearch) -> sa.ColumnElement[bool] | None:
    if search.after is None:
        return None
    value, last_id = search.after
    column = _SORT_COLUMNS[search.sort]
    if column is jobs.c.id:
        return jobs.c.id > last_id if search.ascending else jobs.c.id < last_id
    instant = datetime.fromisoformat(value)
    if search.ascending:
        return sa.or_(column > instant, sa.and_(column == instant, jobs.c.id > last_id))
    return sa.or_(column < instant, sa.and_(column == instant, jobs.c.id < last_id))


def search_statement(search: JobSearch) -> sa.Select[Any]:
    """The page of ``search``: straight through an index when one serves its order and it has no
    text; else among the :data:`SEARCH_WINDOW` newest rows matching its filters."""
    conditions = _search_conditions(search)
    column = _SORT_COLUMNS[search.sort]
    if search.text is not None or not _indexed_order(search):
        window = (
            sa.select(jobs.c.id).where(*conditions).order_by(jobs.c.id.desc()).limit(SEARCH_WINDOW)
        ).scalar_subquery()
        conditions = [jobs.c.id.in_(window)]
    if search.text is not None:
        conditions.append(_text_condition(search.text))
    keyset = _keyset(search)
    if keyset is not None:
        conditions.append(keyset)
    order = [column, jobs.c.id] if column is not jobs.c.id else [jobs.c.id]
    ordered = [c.asc() if search.ascending else c.desc() for c in order]
    return sa.select(jobs).where(*conditions).order_by(*ordered).limit(search.limit)


def _floor(instant: datetime, step: timedelta) -> datetime:
    return _EPOCH + ((instant - _EPOCH) // step) * step
