"""Driver-level writes of the fire path: every fire's outcome (``update_many``), its history entry and
the heartbeat's lease renewal on PostgreSQL, as fixed SQL text with positional parameters run with
``exec_driver_sql``. Each is the equal of a Core statement (``statements.update_statement``, an
insert into ``schedule_fires``, the Core lease renewal), held equal by the fast-path tests."""

from __future__ import annotations

import functools
import operator
from typing import Any

from sqlalchemy.engine import Dialect

from schedule_sdk.adapters.sql.rows import FIRE_FIELDS
from schedule_sdk.adapters.sql.tables import UTCDateTime
from schedule_sdk.adapters.sql.tables import schedule_fires as fires
from schedule_sdk.adapters.sql.tables import schedule_jobs as t
from schedule_sdk.domain.history import FireRecord
from schedule_sdk.domain.jobs import MUTABLE_FIELDS, ScheduledJob
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import Guard

#: Binds datetimes as the ``UTCDateTime`` columns store them.
FIRE_TIME = UTCDateTime()


@functools.cache
def insert_fires(paramstyle: str) -> str:
    """The driver-level INSERT of one history entry: every fire writes one, and an executemany of
    plain tuples skips a Core insert's per-row bind processing."""
    mark = "?" if paramstyle == "qmark" else "%s"
    columns = ", ".join(FIRE_FIELDS)
    return f"INSERT INTO {fires.name} ({columns}) VALUES ({', '.join(mark for _ in FIRE_FIELDS)})"


def fire_params(fire: FireRecord, dialect: Dialect) -> tuple[Any, ...]:
    """The column values of a fire history entry, in ``FIRE_FIELDS`` order, as the driver takes them."""
    to_db = FIRE_TIME.process_bind_param
    return (
        fire.job_id,
        fire.topic,
        fire.occurrence,
        fire.attempt,
        to_db(fire.due_at, dialect),
        to_db(fire.fired_at, dialect),
        fire.lateness_ms,
        fire.duration_ms,
        fire.outcome.value,
        fire.error,
        fire.worker_id,
        fire.traceback,
    )


#: PostgreSQL's lease renewal (the heartbeat's, for every fire the worker holds).
#: Rows another transaction holds (the worker's own recorder, completing them) are skipped, not
#: waited for: waiting could deadlock with a recorder locking the same rows in another order.
EXTEND_PG = (
    f"WITH held AS MATERIALIZED (SELECT id FROM {t.name} "
    "WHERE claimed_by = %s AND status = 'active' AND id = ANY(%s::varchar[]) FOR UPDATE SKIP LOCKED) "
    f"UPDATE {t.name} s SET claimed_until = %s FROM held WHERE s.id = held.id"
)
#: The mutable columns whose values are datetimes (bound through ``UTCDateTime``).
UTC_MUTABLE = frozenset(name for name in MUTABLE_FIELDS if isinstance(t.c[name].type, UTCDateTime))


@functools.cache
def update_sql(statuses: frozenset[JobStatus], checks_claim: bool, paramstyle: str) -> str:
    """:func:`update_statement` as driver-level SQL with positional parameters (the mutable
    values in ``MUTABLE_FIELDS`` order, then the id, then, with ``checks_claim``, the claimer and
    the occurrence): every fire's outcome is written with it, and an ``executemany`` of plain
    tuples skips the Core's per-row bind processing, which was the larger part of the
    recorder's CPU in a burst."""
    mark = "?" if paramstyle == "qmark" else "%s"
    values = ", ".join(f"{name} = {mark}" for name in MUTABLE_FIELDS)
    literals = ", ".join(f"'{s.value}'" for s in sorted(statuses))
    where = f"id = {mark} AND coalesce(status, '') IN ({literals})"  # see guarded
    if checks_claim:
        where += f" AND claimed_by = {mark} AND occurrence = {mark}"
    return f"UPDATE {t.name} SET {values} WHERE {where}"


#: The mutable fields of a job, read in one call (each is its own column, the status as its value).
_MUTABLE_OF = operator.attrgetter(*MUTABLE_FIELDS)
_STATUS_AT = MUTABLE_FIELDS.index("status")


def update_values(job: ScheduledJob, guard: Guard, dialect: Dialect) -> tuple[Any, ...]:
    """The parameters of :func:`update_sql` for ``job`` under ``guard``: only the mutable
    columns are read (not :func:`to_row`'s whole row, whose payload and policies are encoded)."""
    to_db = FIRE_TIME.process_bind_param
    values = [
        to_db(value, dialect) if name in UTC_MUTABLE else value
        for name, value in zip(MUTABLE_FIELDS, _MUTABLE_OF(job), strict=True)
    ]
    values[_STATUS_AT] = job.status.value
    values.append(job.id)
    if guard.claimed_by is not None:
        values += [guard.claimed_by, guard.occurrence]
    return tuple(values)
