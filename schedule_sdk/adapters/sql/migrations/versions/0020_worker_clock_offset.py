"""The worker registry keeps each worker's offset from the store's clock.

Revision ID: 0020
Revises: 0021

``schedule_workers.clock_offset`` and ``clock_error`` (seconds, nullable): what a worker measured
at its last beat, the seconds to add to its own clock to read the store's, and that measurement's
error bound. ``schedule-sdk workers``, the dashboard's workers page and the metrics show them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("schedule_workers") as batch:
        batch.add_column(sa.Column("clock_offset", sa.Float, nullable=True))
        batch.add_column(sa.Column("clock_error", sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedule_workers") as batch:
        batch.drop_column("clock_error")
        batch.drop_column("clock_offset")
