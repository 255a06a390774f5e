"""Drop the index of active claims by worker.

Revision ID: 0021
Revises: 0019

``ix_schedule_jobs_active_worker (claimed_by) WHERE status = 'active'`` matched the guarded update
that writes every fire's outcome (``id = ? AND status = 'active' AND claimed_by = ? AND
occurrence = ?``). When the table's statistics counted few active rows (a fresh table, or any
burst), PostgreSQL chose it over the primary key and walked every row the worker held for each
outcome, more so the larger the burst: 10,000 jobs due at once drained at about 40 % of the rate
without it. Its only reader, ``release_dead`` (a worker declared dead), finds the active rows
through ``ix_schedule_jobs_active_claimed`` instead; there are only as many as the workers hold.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0019"
branch_labels = None
depends_on = None

_ACTIVE = sa.text("status = 'active'")


def upgrade() -> None:
    op.drop_index("ix_schedule_jobs_active_worker", table_name="schedule_jobs")


def downgrade() -> None:
    op.create_index(
        "ix_schedule_jobs_active_worker",
        "schedule_jobs",
        ["claimed_by"],
        postgresql_where=_ACTIVE,
        sqlite_where=_ACTIVE,
    )
