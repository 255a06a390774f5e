"""A repeating job's overlap policy.

Revision ID: 0016
Revises: 0015

``overlap`` (text, NULL for the default: the misfire policy decides): ``'skip'`` or
``'buffer_one'``, what the job does with an occurrence that comes due while its previous fire
still runs. Existing rows get NULL (their behaviour is unchanged).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("schedule_jobs", sa.Column("overlap", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.drop_column("overlap")
