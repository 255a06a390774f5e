"""Table definitions shared by the store, the migrations and the tests.

Timestamps use :class:`UTCDateTime`: ``timestamptz`` on PostgreSQL, and on SQLite fixed-width
ISO 8601 UTC text (``2026-11-21T10:00:00.000000Z``) so that text order is time order. Never
compare them with the database's own clock (SQLite's ``datetime('now')`` has another format):
"now" is always bound from the process clock.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine


class UTCDateTime(TypeDecorator[datetime]):
    """Aware datetimes in, aware UTC datetimes out, on every backend. Naive values are refused.

    On SQLite the text is ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (or ``.fffZ`` with ``milliseconds=True``,
    the timer's wire format): fixed width, so text order is time order.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def __init__(self, *, milliseconds: bool = False) -> None:
        super().__init__()
        self.milliseconds = milliseconds

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(sa.String(24 if self.milliseconds else 27))
        return dialect.type_descriptor(sa.DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        if dialect.name != "sqlite":
            return value.astimezone(UTC)
        return _sqlite_text(value, self.milliseconds)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            return datetime.fromisoformat(value).astimezone(UTC)
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@functools.lru_cache(maxsize=4096)
def _sqlite_text(value: datetime, milliseconds: bool) -> str:
    """The SQLite text of an aware datetime (cached: a row's times often repeat, run_at and
    scheduled_for, created_at and updated_at, and a batch's jobs share them)."""
    text = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return (text[:-3] if milliseconds else text) + "Z"


metadata = sa.MetaData()

# The partial indexes' conditions for PostgreSQL are given to their indexes by
# postgresql_indexes only: naming ``postgresql_where`` in an index loads SQLAlchemy's PostgreSQL
# dialect, which a process on SQLite has no use for. The migrations create the indexes.


def _where(condition: Any) -> dict[str, Any]:
    """An index's partial condition: SQLite's now, PostgreSQL's by :func:`postgresql_indexes`."""
    return {"sqlite_where": condition, "info": {"postgresql_where": condition}}


def postgresql_indexes() -> None:
    """Give the partial indexes their PostgreSQL condition (before DDL or a comparison of the
    schema on PostgreSQL; the metadata's ``before_create`` does it)."""
    for table in metadata.tables.values():
        for index in table.indexes:
            condition = index.info.get("postgresql_where")
            if condition is not None and index.dialect_options["postgresql"]["where"] is None:
                index.dialect_options["postgresql"]["where"] = condition


@sa.event.listens_for(metadata, "before_create")
def _before_create(target: sa.MetaData, connection: sa.Connection, **kw: Any) -> None:
    if connection.dialect.name == "postgresql":
        postgresql_indexes()


schedule_jobs = sa.Table(
    "schedule_jobs",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("topic", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("run_at", UTCDateTime, nullable=False),
    sa.Column("scheduled_for", UTCDateTime, nullable=False),
    sa.Column("timezone", sa.String(64), nullable=False),
    sa.Column("payload", sa.Text, nullable=True),
    sa.Column("owner_id", sa.String(255), nullable=True),
    sa.Column("tenant_id", sa.String(255), nullable=True),
    sa.Column("correlation_id", sa.String(255), nullable=True),
    sa.Column("client_request_id", sa.String(255), nullable=True),
    sa.Column("repeat", sa.Text, nullable=True),
    sa.Column("retry", sa.Text, nullable=False),
    sa.Column("occurrence", sa.Integer, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("occurrence_count", sa.Integer, nullable=False),
    sa.Column("repeat_limit", sa.Integer, nullable=True),
    sa.Column("ends_at", UTCDateTime, nullable=True),
    sa.Column("last_fired_at", UTCDateTime, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("claimed_by", sa.String(64), nullable=True),
    sa.Column("claimed_until", UTCDateTime, nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Column("rescheduled_from", sa.String(36), nullable=True),
    sa.Column("rescheduled_to", sa.String(36), nullable=True),
    sa.Column("misfire", sa.Text, nullable=True),  # JSON; NULL: the default policy (fire_once)
    sa.Column("regular_due", UTCDateTime, nullable=True),
    sa.Column("trace_context", sa.Text, nullable=True),  # migration 0009; see ScheduledJob.trace_context
    # Migration 0017: the job's ConcurrencyLimit (both NULL: none).
    sa.Column("concurrency_key", sa.String(200), nullable=True),
    sa.Column("concurrency_limit", sa.Integer, nullable=True),
    sa.Column("overlap", sa.String(16), nullable=True),  # migration 0016; NULL: the misfire policy decides
    sa.Column("time_limit_ms", sa.Integer, nullable=True),  # migration 0018; NULL: the worker's default
    # migration 0019: spread, jitter and calendar (NULL: none); the calendar as JSON
    sa.Column("spread_ms", sa.Integer, nullable=True),
    sa.Column("spread_offset_ms", sa.Integer, nullable=True),
    sa.Column("jitter_ms", sa.Integer, nullable=True),
    sa.Column("calendar", sa.Text, nullable=True),
    # migration 0022: a run's job (overlap 'allow'); NULL: not a run
    sa.Column("run_of", sa.String(36), nullable=True),
    # migration 0024: the last attempt's outcome (NULL: none ran) and a notice row's kind
    sa.Column("last_outcome", sa.String(16), nullable=True),
    sa.Column("notice", sa.String(16), nullable=True),
    sa.CheckConstraint(
        "status IN ('pending', 'active', 'completed', 'cancelled', 'failed', 'paused')",
        name="ck_schedule_jobs_status",
    ),
)

#: The finished statuses as the literal SQL condition of the retention index (a statement must
#: repeat it verbatim for the planner to use the partial index).
FINISHED_CONDITION = "status IN ('cancelled', 'completed', 'failed')"

_pending = schedule_jobs.c.status == "pending"
# Lookups by owner, tenant and client request id leave NULLs out (migration 0011): nothing looks a
# job up by a NULL, an equality filter implies IS NOT NULL, and an insert without these metadata
# then writes three B-trees fewer.
# A client request id is unique per tenant (migration 0015): among the jobs of one tenant_id, and
# among the jobs without a tenant (two partial indexes: a unique index counts NULLs as distinct).
_crid_untenanted = sa.and_(
    schedule_jobs.c.client_request_id.is_not(None), schedule_jobs.c.tenant_id.is_(None)
)
_crid_tenanted = sa.and_(
    schedule_jobs.c.client_request_id.is_not(None), schedule_jobs.c.tenant_id.is_not(None)
)
sa.Index(
    "uq_schedule_jobs_client_request_id",
    schedule_jobs.c.client_request_id,
    unique=True,
    **_where(_crid_untenanted),
)
sa.Index(
    "uq_schedule_jobs_tenant_client_request_id",
    schedule_jobs.c.tenant_id,
    schedule_jobs.c.client_request_id,
    unique=True,
    **_where(_crid_tenanted),
)
# The delay index: only pending rows, by due time (claims and the poller's next wake-up).
sa.Index(
    "ix_schedule_jobs_pending_due",
    schedule_jobs.c.run_at,
    **_where(_pending),
)
# Concurrency keys (migration 0017): the running fires of a key (what its claims count) and the
# pending fires of keys by due time (what its claims choose, and what waits for a slot). Rows
# without a key are in neither, so their claims and writes touch no more B-trees than before.
#: The conditions of those two indexes, verbatim (a statement repeats them for the planner).
KEYED_ACTIVE_CONDITION = "status = 'active' AND concurrency_key IS NOT NULL"
KEYED_PENDING_CONDITION = "status = 'pending' AND concurrency_key IS NOT NULL"
sa.Index(
    "ix_schedule_jobs_keyed_active",
    schedule_jobs.c.concurrency_key,
    **_where(sa.text(KEYED_ACTIVE_CONDITION)),
)
sa.Index(
    "ix_schedule_jobs_keyed_pending",
    schedule_jobs.c.run_at,
    schedule_jobs.c.concurrency_key,
    **_where(sa.text(KEYED_PENDING_CONDITION)),
)
# Expired leases of active rows (release_expired).
_active = schedule_jobs.c.status == "active"
sa.Index(
    "ix_schedule_jobs_active_claimed",
    schedule_jobs.c.claimed_until,
    **_where(_active),
)
# Retention: finished rows by the time they finished (purge_finished); open rows are not in it.
sa.Index(
    "ix_schedule_jobs_finished",
    schedule_jobs.c.updated_at,
    **_where(sa.text(FINISHED_CONDITION)),
)
# Keyset pages of list(), per filter.
for _column in (schedule_jobs.c.owner_id, schedule_jobs.c.tenant_id):
    sa.Index(
        f"ix_schedule_jobs_{_column.name.removesuffix('_id')}",
        _column,
        schedule_jobs.c.id,
        **_where(_column.is_not(None)),
    )
sa.Index("ix_schedule_jobs_topic", schedule_jobs.c.topic, schedule_jobs.c.id)

# -- the worker registry and the trace context of a job (migration 0005) ------------------

#: One row per running worker, written by its heartbeat (see ``WorkerRegistry.beat``).
schedule_workers = sa.Table(
    "schedule_workers",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("node", sa.String(128), nullable=True),
    sa.Column("substrate", sa.String(16), nullable=False),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("last_beat", UTCDateTime, nullable=False),
    sa.Column("in_flight", sa.Integer, nullable=False),
    # migration 0018: listener threads still running a timed-out fire
    sa.Column("stuck", sa.Integer, nullable=False, server_default="0"),
    # The worker's offset from the store's clock and its error bound, seconds (migration 0020).
    sa.Column("clock_offset", sa.Float, nullable=True),
    sa.Column("clock_error", sa.Float, nullable=True),
)
# No index of active claims by worker: the guarded outcome update (id, status, claimed_by,
# occurrence) must read the primary key, and a partial index on claimed_by lured PostgreSQL's
# planner into walking every row the worker held (migration 0021). release_dead reads the active
# rows through ix_schedule_jobs_active_claimed.

#: The condition of the status index, verbatim (a statement must repeat it for the planner to use
#: the partial index). Pending rows are left out: the claim path filters on status = 'pending' and
#: must keep using ix_schedule_jobs_pending_due (a full (status, id) index lured SQLite away from it).
NOT_PENDING_CONDITION = "status <> 'pending'"
# Keyset pages of list() filtered by statuses other than pending (the dashboard's).
sa.Index(
    "ix_schedule_jobs_status",
    schedule_jobs.c.status,
    schedule_jobs.c.id,
    **_where(sa.text(NOT_PENDING_CONDITION)),
)

#: Fire history: one row per attempt run or skipped, written with the fire's outcome.
schedule_fires = sa.Table(
    "schedule_fires",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(36), nullable=False),
    sa.Column("topic", sa.String(200), nullable=False),
    sa.Column("occurrence", sa.Integer, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("due_at", UTCDateTime, nullable=False),
    sa.Column("fired_at", UTCDateTime, nullable=False),
    sa.Column("lateness_ms", sa.BigInteger, nullable=False),
    sa.Column("duration_ms", sa.BigInteger, nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("worker_id", sa.String(64), nullable=True),
    # A failed attempt's traceback, capped (migration 0014).
    sa.Column("traceback", sa.Text, nullable=True),
    # 'unheard': migration 0013; 'timeout': migration 0018
    sa.CheckConstraint(
        "outcome IN ('succeeded', 'failed', 'skipped', 'unheard', 'timeout')",
        name="ck_schedule_fires_outcome",
    ),
)
# One job's history, newest first (ScheduleService.history, the job page).
sa.Index("ix_schedule_fires_job", schedule_fires.c.job_id, schedule_fires.c.fired_at)
# Everything in a time window and retention (purge_history). It covers the overview's aggregates
# (outcome, lateness, topic), which then read no table rows (with an index on fired_at alone, an
# hour of fires cost mostly row lookups).
sa.Index(
    "ix_schedule_fires_fired",
    schedule_fires.c.fired_at,
    schedule_fires.c.outcome,
    schedule_fires.c.lateness_ms,
    schedule_fires.c.topic,
)

#: The per-minute summary of the fire history (migration 0010), kept by the transaction that
#: writes the entries (``record_fires``) and read by the dashboard's overview instead of the
#: entries: a day is at most 1,440 x 22 rows per shard however many fires it had. ``minute`` counts whole
#: minutes since 1970-01-01 UTC of ``fired_at``; ``lateness_class`` indexes
#: :data:`~schedule_sdk.domain.history.LATENESS_BOUNDS` (a histogram with fixed bounds, so
#: percentiles over any span are read from summed counts); ``shard`` spreads a minute's counts
#: over several rows that concurrent writers add to without waiting for each other (see
#: :mod:`.fire_minutes`): readers sum them.
schedule_fire_minutes = sa.Table(
    "schedule_fire_minutes",
    metadata,
    sa.Column("minute", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("lateness_class", sa.SmallInteger, primary_key=True, autoincrement=False),
    sa.Column("shard", sa.SmallInteger, primary_key=True, autoincrement=False),
    sa.Column("succeeded", sa.Integer, nullable=False),
    sa.Column("failed", sa.Integer, nullable=False),
    sa.Column("skipped", sa.Integer, nullable=False),
)

#: Failed fires per minute and topic (migration 0010): rows only where a fire failed.
schedule_fire_failures = sa.Table(
    "schedule_fire_failures",
    metadata,
    sa.Column("minute", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("topic", sa.String(200), primary_key=True),
    sa.Column("shard", sa.SmallInteger, primary_key=True, autoincrement=False),
    sa.Column("failed", sa.Integer, nullable=False),
)

#: Schedules declared in code (migration 0012), one row per name; ``job_id`` marks the job as
#: code-owned (see :class:`~schedule_sdk.domain.declared.StoredDeclaration`).
schedule_declared = sa.Table(
    "schedule_declared",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("job_id", sa.String(36), nullable=False),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("declared", sa.Boolean, nullable=False),
    sa.Column("synced_at", UTCDateTime, nullable=False),
    sa.CheckConstraint("kind IN ('cron', 'every', 'after')", name="ck_schedule_declared_kind"),
)
sa.Index("uq_schedule_declared_job", schedule_declared.c.job_id, unique=True)


def dialect_insert(dialect: str) -> Any:
    """The ``insert`` of ``dialect`` (``postgresql`` or ``sqlite``: their ``ON CONFLICT``), its
    module imported on first use."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    from sqlalchemy.dialects import sqlite

    return sqlite.insert
