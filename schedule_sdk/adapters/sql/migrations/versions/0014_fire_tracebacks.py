"""Fire history: the traceback of a failed attempt.

Revision ID: 0014
Revises: 0013

``schedule_fires.traceback`` (nullable text) keeps the traceback of a failed attempt's error,
its tail capped by the fire history's traceback limit; older entries have none.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("schedule_fires", sa.Column("traceback", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedule_fires") as batch:
        batch.drop_column("traceback")
