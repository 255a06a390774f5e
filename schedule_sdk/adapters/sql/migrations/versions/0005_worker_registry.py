"""Create the worker registry and index active claims by worker.

Revision ID: 0005
Revises: 0003

``schedule_workers`` holds one row per running worker, renewed by its heartbeat; a worker whose
beat stops is declared dead by a live one, which releases its claims at once (found through the
partial index on ``claimed_by`` of active rows) instead of waiting for their leases to end.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from schedule_sdk.adapters.sql.tables import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_ACTIVE = sa.text("status = 'active'")


def upgrade() -> None:
    op.create_table(
        "schedule_workers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("node", sa.String(128), nullable=True),
        sa.Column("substrate", sa.String(16), nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("last_beat", UTCDateTime, nullable=False),
        sa.Column("in_flight", sa.Integer, nullable=False),
    )
    op.create_index(
        "ix_schedule_jobs_active_worker",
        "schedule_jobs",
        ["claimed_by"],
        postgresql_where=_ACTIVE,
        sqlite_where=_ACTIVE,
    )


def downgrade() -> None:
    op.drop_index("ix_schedule_jobs_active_worker", table_name="schedule_jobs")
    op.drop_table("schedule_workers")
