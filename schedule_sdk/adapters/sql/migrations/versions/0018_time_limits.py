"""Time limits: a job's own limit, the ``timeout`` fire outcome, stuck listener threads.

Revision ID: 0018
Revises: 0017

- ``schedule_jobs.time_limit_ms`` (integer, NULL: no limit of its own; the worker's default for
  the topic applies);
- ``schedule_fires.outcome`` also takes ``'timeout'``: an attempt whose listeners ran past the
  fire's time limit (the check constraint ``ck_schedule_fires_outcome`` is replaced; on SQLite
  the table is rebuilt, with its indexes);
- ``schedule_workers.stuck`` (integer, 0 by default): how many of the worker's listener threads
  still run a fire that timed out, as of its last beat.

The downgrade keeps the history of timed-out attempts as ``failed`` ones.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_NAME = "ck_schedule_fires_outcome"


def _outcomes(condition: str) -> None:
    with op.batch_alter_table("schedule_fires", recreate="auto") as batch:
        batch.drop_constraint(_NAME, type_="check")
        batch.create_check_constraint(_NAME, condition)


def upgrade() -> None:
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.add_column(sa.Column("time_limit_ms", sa.Integer, nullable=True))
    with op.batch_alter_table("schedule_workers") as batch:
        batch.add_column(sa.Column("stuck", sa.Integer, nullable=False, server_default="0"))
    _outcomes("outcome IN ('succeeded', 'failed', 'skipped', 'unheard', 'timeout')")


def downgrade() -> None:
    op.execute("UPDATE schedule_fires SET outcome = 'failed' WHERE outcome = 'timeout'")
    _outcomes("outcome IN ('succeeded', 'failed', 'skipped', 'unheard')")
    with op.batch_alter_table("schedule_workers") as batch:
        batch.drop_column("stuck")
    with op.batch_alter_table("schedule_jobs") as batch:
        batch.drop_column("time_limit_ms")
