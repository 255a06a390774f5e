"""Create schedule_jobs.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from schedule_sdk.adapters.sql.tables import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_PENDING = sa.text("status = 'pending'")

# PostgreSQL: tell every poller (LISTEN schedule_sdk_jobs) when a job becomes pending, with its due
# time as the payload, so a worker sleeping toward a later job wakes for an earlier one.
_NOTIFY_FUNCTION = """
CREATE OR REPLACE FUNCTION schedule_sdk_notify_pending() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('schedule_sdk_jobs',
                      to_char(NEW.run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'));
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
_NOTIFY_TRIGGERS = (
    (
        "CREATE TRIGGER schedule_jobs_notify_insert AFTER INSERT ON schedule_jobs "
        "FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION schedule_sdk_notify_pending()"
    ),
    (
        "CREATE TRIGGER schedule_jobs_notify_pending AFTER UPDATE OF status ON schedule_jobs "
        "FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status <> 'pending') "
        "EXECUTE FUNCTION schedule_sdk_notify_pending()"
    ),
)


def upgrade() -> None:
    op.create_table(
        "schedule_jobs",
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
        sa.CheckConstraint(
            "status IN ('pending', 'active', 'completed', 'cancelled', 'failed')",
            name="ck_schedule_jobs_status",
        ),
    )
    op.create_index("uq_schedule_jobs_client_request_id", "schedule_jobs", ["client_request_id"], unique=True)
    op.create_index(
        "ix_schedule_jobs_pending_due",
        "schedule_jobs",
        ["run_at"],
        postgresql_where=_PENDING,
        sqlite_where=_PENDING,
    )
    op.create_index("ix_schedule_jobs_status_claimed", "schedule_jobs", ["status", "claimed_until"])
    op.create_index("ix_schedule_jobs_owner", "schedule_jobs", ["owner_id", "id"])
    op.create_index("ix_schedule_jobs_tenant", "schedule_jobs", ["tenant_id", "id"])
    op.create_index("ix_schedule_jobs_topic", "schedule_jobs", ["topic", "id"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_NOTIFY_FUNCTION)
        for trigger in _NOTIFY_TRIGGERS:
            op.execute(trigger)


def downgrade() -> None:
    op.drop_table("schedule_jobs")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS schedule_sdk_notify_pending()")
