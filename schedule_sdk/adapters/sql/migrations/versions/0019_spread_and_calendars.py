"""Spread, jitter and calendars of a job.

Revision ID: 0019
Revises: 0018

Four nullable columns on ``schedule_jobs``, NULL for the jobs that use none of them:

- ``spread_ms`` (integer): the spread window; ``spread_offset_ms`` (integer): the job's
  deterministic delay inside it (every occurrence is due that long after its nominal instant);
- ``jitter_ms`` (integer): the window of the random delay drawn per occurrence;
- ``calendar`` (JSON text): the excluded dates, weekdays and holiday spec
  (:class:`~schedule_sdk.Calendar`).

Existing rows keep their behaviour (no spread, no jitter, no calendar).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_COLUMNS = ("spread_ms", "spread_offset_ms", "jitter_ms", "calendar")


def upgrade() -> None:
    op.add_column("schedule_jobs", sa.Column("spread_ms", sa.Integer, nullable=True))
    op.add_column("schedule_jobs", sa.Column("spread_offset_ms", sa.Integer, nullable=True))
    op.add_column("schedule_jobs", sa.Column("jitter_ms", sa.Integer, nullable=True))
    op.add_column("schedule_jobs", sa.Column("calendar", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedule_jobs") as batch:
        for column in reversed(_COLUMNS):
            batch.drop_column(column)
