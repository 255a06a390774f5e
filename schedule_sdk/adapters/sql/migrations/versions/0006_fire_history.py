"""Fire history and the dashboard's index.

Revision ID: 0006
Revises: 0004

- ``schedule_fires``: one row per attempt a worker ran or skipped (job id, topic, occurrence,
  attempt, due and fire instants, lateness and duration in ms, outcome, error, worker), written in
  the transaction that records the fire's outcome;
- ``ix_schedule_fires_job (job_id, fired_at)``: one job's history, newest first;
- ``ix_schedule_fires_fired (fired_at, outcome, lateness_ms, topic)``: time windows and retention,
  covering the dashboard's aggregates (they read no table rows);
- ``ix_schedule_jobs_status (status, id) WHERE status <> 'pending'``: keyset pages of jobs filtered
  by a status other than pending (pending rows stay out, so claims keep their own index).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from schedule_sdk.adapters.sql.tables import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_NOT_PENDING = sa.text("status <> 'pending'")


def upgrade() -> None:
    op.create_table(
        "schedule_fires",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
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
        sa.CheckConstraint("outcome IN ('succeeded', 'failed', 'skipped')", name="ck_schedule_fires_outcome"),
    )
    op.create_index("ix_schedule_fires_job", "schedule_fires", ["job_id", "fired_at"])
    op.create_index(
        "ix_schedule_fires_fired", "schedule_fires", ["fired_at", "outcome", "lateness_ms", "topic"]
    )
    op.create_index(
        "ix_schedule_jobs_status",
        "schedule_jobs",
        ["status", "id"],
        postgresql_where=_NOT_PENDING,
        sqlite_where=_NOT_PENDING,
    )


def downgrade() -> None:
    op.drop_index("ix_schedule_jobs_status", table_name="schedule_jobs")
    op.drop_table("schedule_fires")
