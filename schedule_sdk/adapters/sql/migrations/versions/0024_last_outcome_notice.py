"""The last attempt's outcome on the job's row, and notice rows.

Revision ID: 0024
Revises: 0023

``schedule_jobs.last_outcome`` (NULL: no attempt ran yet): how the job's last attempt ended, the
outcome of its newest fire history entry (``succeeded``, ``failed``, ``skipped``, ``unheard``,
``timeout``), written with each fire's outcome so lists show and filter it (an unheard fire is
visible where the job is listed). Existing rows get NULL: their outcome is in the history.

``schedule_jobs.notice`` (NULL: an ordinary job): ``'failed'`` on the one-shot row that delivers
the ``schedule.failed`` event of a job that gave up, inserted in the transaction that records the
give-up, so the event survives a worker's crash.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.add_column(sa.Column("last_outcome", sa.String(16), nullable=True))
        batch.add_column(sa.Column("notice", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.drop_column("notice")
        batch.drop_column("last_outcome")
