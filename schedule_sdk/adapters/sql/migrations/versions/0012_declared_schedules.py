"""Schedules declared in code.

Revision ID: 0012
Revises: 0011

``schedule_declared``: one row per declared schedule name (the primary key, so two processes
syncing at once cannot both create one). ``job_id`` is the code-owned marker: the job a sync made
for the declaration; a job no row names was created at run time and no sync ever touches it.
``fingerprint`` is the digest of the declared spec (a sync writes only names whose fingerprint
changed), ``spec`` the declared spec as JSON, ``version`` the version of the code that wrote the
row (older code leaves it alone), ``declared`` false once the code stopped declaring it (the job was
cancelled; the row stays so that older code cannot bring it back).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from schedule_sdk.adapters.sql.tables import UTCDateTime

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedule_declared",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("declared", sa.Boolean, nullable=False),
        sa.Column("synced_at", UTCDateTime, nullable=False),
        sa.CheckConstraint("kind IN ('cron', 'every', 'after')", name="ck_schedule_declared_kind"),
    )
    op.create_index("uq_schedule_declared_job", "schedule_declared", ["job_id"], unique=True)


def downgrade() -> None:
    op.drop_table("schedule_declared")
