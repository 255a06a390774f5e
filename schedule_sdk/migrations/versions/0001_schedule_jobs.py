"""Create schedule_jobs.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from schedule_sdk.adapters.stores._tables import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_PENDING = sa.text("status = 'pending'")


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


def downgrade() -> None:
    op.drop_table("schedule_jobs")
