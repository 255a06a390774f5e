"""Steering and retention: the ``paused`` status, the misfire policy, trigger's regular due
instant, and an index of finished rows.

Revision ID: 0004
Revises: 0003

- ``ck_schedule_jobs_status`` also allows ``paused`` (SQLite cannot alter a CHECK constraint, so
  there the table is rebuilt, indexes included, in the migration's transaction);
- ``misfire`` (JSON text, NULL for the default ``fire_once``) and ``regular_due`` (the regular
  occurrence an extra fire from ``trigger`` was put before);
- ``ix_schedule_jobs_finished (updated_at) WHERE status IN ('cancelled', 'completed', 'failed')``:
  the purge reads finished rows oldest first without touching open ones;
- PostgreSQL: the pending notification also fires when a pending row's ``run_at`` moves earlier
  (``trigger``), so a worker of another process sleeping toward a later job wakes up.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from schedule_sdk.adapters.sql.tables import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_FINISHED = sa.text("status IN ('cancelled', 'completed', 'failed')")
_STATUSES = "status IN ('pending', 'active', 'completed', 'cancelled', 'failed'{})"
_NOTIFY_TRIGGER = (
    "CREATE TRIGGER schedule_jobs_notify_pending AFTER UPDATE OF status, run_at ON schedule_jobs "
    "FOR EACH ROW WHEN (NEW.status = 'pending' AND (OLD.status <> 'pending' OR NEW.run_at < OLD.run_at)) "
    "EXECUTE FUNCTION schedule_sdk_notify_pending()"
)
_OLD_NOTIFY_TRIGGER = (
    "CREATE TRIGGER schedule_jobs_notify_pending AFTER UPDATE OF status ON schedule_jobs "
    "FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status <> 'pending') "
    "EXECUTE FUNCTION schedule_sdk_notify_pending()"
)


def _status_check(paused: bool) -> str:
    return _STATUSES.format(", 'paused'" if paused else "")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    # recreate="auto": ALTER where the database can (PostgreSQL), a table copy where not (SQLite).
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.add_column(sa.Column("misfire", sa.Text, nullable=True))
        batch.add_column(sa.Column("regular_due", UTCDateTime, nullable=True))
        batch.drop_constraint("ck_schedule_jobs_status", type_="check")
        batch.create_check_constraint("ck_schedule_jobs_status", sa.text(_status_check(paused=True)))
    op.create_index(
        "ix_schedule_jobs_finished",
        "schedule_jobs",
        ["updated_at"],
        postgresql_where=_FINISHED,
        sqlite_where=_FINISHED,
    )
    if postgres:
        op.execute("DROP TRIGGER IF EXISTS schedule_jobs_notify_pending ON schedule_jobs")
        op.execute(_NOTIFY_TRIGGER)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        op.execute("DROP TRIGGER IF EXISTS schedule_jobs_notify_pending ON schedule_jobs")
        op.execute(_OLD_NOTIFY_TRIGGER)
    op.drop_index("ix_schedule_jobs_finished", table_name="schedule_jobs")
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.drop_constraint("ck_schedule_jobs_status", type_="check")
        batch.create_check_constraint("ck_schedule_jobs_status", sa.text(_status_check(paused=False)))
        batch.drop_column("regular_due")
        batch.drop_column("misfire")
