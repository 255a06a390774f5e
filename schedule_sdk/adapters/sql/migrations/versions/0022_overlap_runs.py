"""The runs of a repeating job with the overlap policy ``allow``.

Revision ID: 0022
Revises: 0020

``schedule_jobs.run_of`` (the id of a job, NULL: not a run): set on the one-shot row that fires
one occurrence of a repeating job whose overlap policy is ``'allow'``; the row's events and fire
history name that job. Existing rows get NULL (none of them is a run).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.add_column(sa.Column("run_of", sa.String(36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.drop_column("run_of")
