"""Index expired leases with a partial index on active rows.

Revision ID: 0003
Revises: 0002

0001's ``ix_schedule_jobs_status_claimed (status, claimed_until)`` served only
``release_expired`` (``status = 'active' AND claimed_until < now``), but SQLite's planner also
chose it for ``status = 'pending'`` lookups (claims, the next due instant), reading every pending
row instead of the partial due index. A partial index on active rows serves ``release_expired``
alone and is smaller.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_ACTIVE = sa.text("status = 'active'")


def upgrade() -> None:
    op.drop_index("ix_schedule_jobs_status_claimed", table_name="schedule_jobs")
    op.create_index(
        "ix_schedule_jobs_active_claimed",
        "schedule_jobs",
        ["claimed_until"],
        postgresql_where=_ACTIVE,
        sqlite_where=_ACTIVE,
    )


def downgrade() -> None:
    op.drop_index("ix_schedule_jobs_active_claimed", table_name="schedule_jobs")
    op.create_index("ix_schedule_jobs_status_claimed", "schedule_jobs", ["status", "claimed_until"])
