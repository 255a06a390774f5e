"""The SQL job store's statements (SQLAlchemy Core), built once where their shape is fixed.

Status tests are literals, not bound parameters, so the planner can use the partial indexes
(``ix_schedule_jobs_pending_due``, ``ix_schedule_jobs_active_claimed``, ``ix_schedule_jobs_finished``)
rather than read every row; the query-plan tests hold each statement to its index."""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa

from schedule_sdk.adapters.sql.tables import (
    FINISHED_CONDITION,
    KEYED_PENDING_CONDITION,
    NOT_PENDING_CONDITION,
    UTCDateTime,
)
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.domain.jobs import MUTABLE_FIELDS, JobQuery
from schedule_sdk.domain.status import JobStatus


def guarded(statuses: frozenset[JobStatus], checks_claim: bool) -> list[sa.ColumnElement[bool]]:
    # Statuses as SQL literals (fixed enum strings): an expanding IN parameter cannot be used
    # with executemany, which update_many relies on.
    #
    # The status is compared through a no-op expression (the column is NOT NULL) that no partial
    # index's condition matches: on the column itself, PostgreSQL's planner could prove a partial
    # index of active rows usable and, when its statistics count few active rows (a fresh table,
    # any burst), walk every row held by the worker for each outcome instead of reading the
    # primary key (test_postgres_query_plans checks the plan; W2 lost half its rate to it).
    literals: list[sa.ColumnElement[Any]] = [sa.literal_column(f"'{s.value}'") for s in sorted(statuses)]
    clauses = [
        t.c.id == sa.bindparam("b_id"),
        sa.func.coalesce(t.c.status, sa.literal_column("''")).in_(literals),
    ]
    if checks_claim:
        clauses += [
            t.c.claimed_by == sa.bindparam("b_claimed_by"),
            t.c.occurrence == sa.bindparam("b_occurrence"),
        ]
    return clauses


@functools.cache
def update_statement(statuses: frozenset[JobStatus], checks_claim: bool) -> sa.Update:
    """The guarded update of one row, one statement per guard shape (built once: every fire's
    outcome is written with it)."""
    values = {name: sa.bindparam(f"v_{name}", type_=t.c[name].type) for name in MUTABLE_FIELDS}
    return sa.update(t).where(*guarded(statuses, checks_claim)).values(values)


def once(ids: sa.Select[Any]) -> sa.Select[Any]:
    """``ids`` (a limited ``SELECT ... FOR UPDATE SKIP LOCKED``) evaluated once, as a CTE: as a plain
    ``IN (subquery)`` PostgreSQL may rescan it per outer row (nested-loop semi join) and, since rows
    updated meanwhile are skipped, return more than ``LIMIT`` rows in all."""
    chosen = ids.cte()
    return sa.select(chosen.c.id)


NOW = sa.bindparam("c_now", type_=UTCDateTime)


def claiming(where: list[sa.ColumnElement[bool]]) -> sa.Update:
    """``UPDATE … SET status='active'`` claimed by ``c_worker`` until ``c_lease``, for rows matching
    ``where``, returning them (bind ``c_now``, ``c_worker``, ``c_lease``)."""
    return (
        sa.update(t)
        .where(*where)
        .values(
            status="active",
            claimed_by=sa.bindparam("c_worker"),
            claimed_until=sa.bindparam("c_lease", type_=UTCDateTime),
            updated_at=NOW,
        )
        .returning(*t.c)
    )


#: Outcomes: a lost one leaves its fire claimed, to fire again (see ``outcome_transaction``).
NO_FLUSH_WAIT = sa.text("SET LOCAL synchronous_commit = off")
# Status tests as literals, not bound parameters, so the planner can use the partial indexes
# (ix_schedule_jobs_pending_due, ix_schedule_jobs_active_claimed) rather than read every row.
PENDING = t.c.status == sa.literal_column("'pending'")
ACTIVE = t.c.status == sa.literal_column("'active'")
FINISHED = sa.text(FINISHED_CONDITION)
NOT_PENDING = sa.text(NOT_PENDING_CONDITION)

#: Whether any active row's lease ended before ``c_now``: the read ``release_expired`` makes before
#: it takes a write transaction, which it needs only when one did (rarely: a worker died mid-fire).
ANY_EXPIRED: sa.Select[tuple[int]] = (
    sa.select(sa.literal_column("1")).where(ACTIVE, t.c.claimed_until < NOW).limit(1)
)

#: The reconciler's scan: the key columns of open rows, in id order (the primary key's order).
OPEN_OCCURRENCES = (
    sa.select(t.c.id, t.c.status, t.c.occurrence, t.c.attempt, t.c.run_at)
    .where(t.c.status.in_(["pending", "active"]))
    .order_by(t.c.id)
)

#: Whether a row is still as its claim returned it; bind ``s_id``, ``s_worker``,
#: ``s_occurrence``, ``s_attempt`` (SQLite; PostgreSQL's is ``pg_claims.STILL_CLAIMED``).
STILL_CLAIMED = sa.select(sa.literal(1)).where(
    t.c.id == sa.bindparam("s_id"),
    ACTIVE,
    t.c.claimed_by == sa.bindparam("s_worker"),
    t.c.occurrence == sa.bindparam("s_occurrence"),
    t.c.attempt == sa.bindparam("s_attempt"),
)

# SQLite's claims (PostgreSQL's are in pg_claims), built once. They run in a write transaction
# (BEGIN IMMEDIATE), so no other writer changes a row between choosing and updating it.
# Bind c_limit as well.
UNKEYED = t.c.concurrency_key.is_(None)
LIMIT = sa.bindparam("c_limit", type_=sa.Integer)
CLAIM_DUE = claiming(
    [
        t.c.id.in_(
            sa.select(t.c.id).where(PENDING, t.c.run_at <= NOW, UNKEYED).order_by(t.c.run_at).limit(LIMIT)
        ),
    ]
)

# Bind c_ids (the job ids) and c_keys ((id, occurrence, attempt) tuples): the id list lets SQLite
# look the rows up by primary key.
CLAIM_MANY = claiming(
    [
        t.c.id.in_(sa.bindparam("c_ids", expanding=True)),
        sa.tuple_(t.c.id, t.c.occurrence, t.c.attempt).in_(sa.bindparam("c_keys", expanding=True)),
        PENDING,
        t.c.run_at <= NOW,
        UNKEYED,
    ]
)


def keyed_claim(*, given: bool) -> sa.Update:
    """SQLite's claim of rows with a concurrency key (:mod:`schedule_sdk.domain.concurrency`): each
    waiting row in due order, while its key's active rows plus its place among the key's waiting
    rows stay within its limit. It runs in the claim's write transaction, which no other claim
    shares. Bind ``c_limit`` (``given``: ``c_ids`` and ``c_keys`` too, as ``CLAIM_MANY``)."""
    j, a = t.alias("j"), t.alias("a")
    running = (
        sa.select(sa.func.count())
        .select_from(a)
        .where(
            a.c.status == sa.literal_column("'active'"),
            a.c.concurrency_key.is_not(None),
            a.c.concurrency_key == j.c.concurrency_key,
        )
        .scalar_subquery()
    )
    place = sa.func.row_number().over(partition_by=j.c.concurrency_key, order_by=(j.c.run_at, j.c.id))
    where = [
        j.c.status == sa.literal_column("'pending'"),
        j.c.concurrency_key.is_not(None),
        j.c.run_at <= NOW,
    ]
    if given:
        where += [
            j.c.id.in_(sa.bindparam("c_ids", expanding=True)),
            sa.tuple_(j.c.id, j.c.occurrence, j.c.attempt).in_(sa.bindparam("c_keys", expanding=True)),
        ]
    columns = (
        j.c.id,
        j.c.run_at,
        j.c.concurrency_limit.label("lim"),
        place.label("place"),
        running.label("n"),
    )
    waiting = sa.select(*columns).where(*where).subquery()
    chosen = (
        sa.select(waiting.c.id)
        .where(waiting.c.n + waiting.c.place <= waiting.c.lim)
        .order_by(waiting.c.run_at, waiting.c.id)
        .limit(LIMIT)
    )
    return claiming([t.c.id.in_(chosen), PENDING])


#: The earliest pending run_at; with ``n_now`` bound, leaving out keyed rows due by then (waiting).
NEXT_DUE = sa.select(sa.func.min(t.c.run_at)).where(PENDING)
NEXT_DUE_UNWAITING = NEXT_DUE.where(sa.or_(UNKEYED, t.c.run_at > sa.bindparam("n_now", type_=UTCDateTime)))
CLAIM_KEYED = keyed_claim(given=False)
CLAIM_KEYED_MANY = keyed_claim(given=True)


# Retention: the oldest finished rows, read through the partial index ix_schedule_jobs_finished
# (its condition repeated verbatim), never the open rows. Bind p_before and p_limit.
PURGE_CHOICE = (
    sa.select(t.c.id)
    .where(FINISHED, t.c.updated_at < sa.bindparam("p_before", type_=UTCDateTime))
    .order_by(t.c.updated_at)
    .limit(sa.bindparam("p_limit", type_=sa.Integer))
)
PURGE = sa.delete(t).where(t.c.id.in_(PURGE_CHOICE))
PURGE_PG = sa.delete(t).where(t.c.id.in_(once(PURGE_CHOICE.with_for_update(skip_locked=True))))


def list_statement(query: JobQuery) -> sa.Select[Any]:
    """The keyset page of ``list_jobs``: by id, through the primary key or a filter's
    ``(column, id)`` index (ix_schedule_jobs_owner, _tenant, _topic)."""
    statement = sa.select(t).order_by(t.c.id).limit(query.limit)
    for column, value in (
        ("owner_id", query.owner_id),
        ("tenant_id", query.tenant_id),
        ("topic", query.topic),
    ):
        if value is not None:
            statement = statement.where(t.c[column] == value)
    if query.statuses:
        statement = statement.where(t.c.status.in_(sorted(s.value for s in query.statuses)))
        if JobStatus.PENDING not in query.statuses:  # lets the planner use ix_schedule_jobs_status
            statement = statement.where(NOT_PENDING)
    if query.outcomes:
        statement = statement.where(t.c.last_outcome.in_(sorted(o.value for o in query.outcomes)))
    if query.after_id is not None:
        statement = statement.where(t.c.id > query.after_id)
    return statement


#: SQLite, after a claim: the next due instant (leaving out keyed rows due by ``n_now``, which wait)
#: and whether rows with a key are due by then.
NEXT_PLAN = sa.select(
    NEXT_DUE_UNWAITING.scalar_subquery(),
    sa.exists().where(
        sa.text(KEYED_PENDING_CONDITION), t.c.run_at <= sa.bindparam("n_now", type_=UTCDateTime)
    ),
)
