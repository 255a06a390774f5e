"""Concurrency keys: at most N fires of a key run at once.

Revision ID: 0017
Revises: 0016

- ``concurrency_key`` (text, up to 200) and ``concurrency_limit`` (int): the job's
  ``ConcurrencyLimit``; both NULL for a job without one (every existing row);
- ``ix_schedule_jobs_keyed_active (concurrency_key) WHERE status = 'active' AND concurrency_key
  IS NOT NULL``: the running fires of a key, what a claim of that key counts;
- ``ix_schedule_jobs_keyed_pending (run_at, concurrency_key) WHERE status = 'pending' AND
  concurrency_key IS NOT NULL``: the keyed fires by due time, what such a claim chooses from;
- PostgreSQL: a trigger notifies the jobs channel when a keyed row stops being active (its slot
  frees), with the due instant it had been claimed for, so the pollers of every process try the
  fires waiting for that slot at once rather than at their next read.

Rows without a key are in neither index.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_ACTIVE = "status = 'active' AND concurrency_key IS NOT NULL"
_PENDING = "status = 'pending' AND concurrency_key IS NOT NULL"

_SLOT_FUNCTION = """
CREATE OR REPLACE FUNCTION schedule_sdk_notify_slot() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('schedule_sdk_jobs',
                      to_char(OLD.run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'));
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
_SLOT_TRIGGER = (
    "CREATE TRIGGER schedule_jobs_notify_slot AFTER UPDATE OF status ON schedule_jobs "
    "FOR EACH ROW WHEN (OLD.status = 'active' AND NEW.status <> 'active' "
    "AND OLD.concurrency_key IS NOT NULL) EXECUTE FUNCTION schedule_sdk_notify_slot()"
)


def upgrade() -> None:
    op.add_column("schedule_jobs", sa.Column("concurrency_key", sa.String(200), nullable=True))
    op.add_column("schedule_jobs", sa.Column("concurrency_limit", sa.Integer, nullable=True))
    for name, columns, condition in (
        ("ix_schedule_jobs_keyed_active", ["concurrency_key"], _ACTIVE),
        ("ix_schedule_jobs_keyed_pending", ["run_at", "concurrency_key"], _PENDING),
    ):
        where = sa.text(condition)
        op.create_index(name, "schedule_jobs", columns, postgresql_where=where, sqlite_where=where)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_SLOT_FUNCTION)
        op.execute(_SLOT_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS schedule_jobs_notify_slot ON schedule_jobs")
        op.execute("DROP FUNCTION IF EXISTS schedule_sdk_notify_slot()")
    op.drop_index("ix_schedule_jobs_keyed_pending", table_name="schedule_jobs")
    op.drop_index("ix_schedule_jobs_keyed_active", table_name="schedule_jobs")
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.drop_column("concurrency_limit")
        batch.drop_column("concurrency_key")
