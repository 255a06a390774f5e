"""Fire history: the ``unheard`` outcome.

Revision ID: 0013
Revises: 0012

``schedule_fires.outcome`` also takes ``'unheard'``: a fire that no listener heard (the job moved
on as after a success, or, with ``unheard_fails``, its attempt failed). The check constraint
``ck_schedule_fires_outcome`` is replaced (on SQLite the table is rebuilt, with its indexes).
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_NAME = "ck_schedule_fires_outcome"


def _outcomes(condition: str) -> None:
    with op.batch_alter_table("schedule_fires", recreate="auto") as batch:
        batch.drop_constraint(_NAME, type_="check")
        batch.create_check_constraint(_NAME, condition)


def upgrade() -> None:
    _outcomes("outcome IN ('succeeded', 'failed', 'skipped', 'unheard')")


def downgrade() -> None:
    op.execute("DELETE FROM schedule_fires WHERE outcome = 'unheard'")
    _outcomes("outcome IN ('succeeded', 'failed', 'skipped')")
