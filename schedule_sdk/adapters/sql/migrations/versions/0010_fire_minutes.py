"""The per-minute summary of the fire history, for the dashboard's overview.

Revision ID: 0010
Revises: 0009

- ``schedule_fire_minutes (minute, lateness_class, shard) -> succeeded, failed, skipped``: fires
  per minute of ``fired_at`` (whole minutes since 1970-01-01 UTC) and lateness class (the fixed
  bounds of ``schedule_sdk.domain.history.LATENESS_BOUNDS``);
- ``schedule_fire_failures (minute, topic, shard) -> failed``: failed fires per minute and topic.

``shard`` spreads the counts of a minute over rows that concurrent writers update without
waiting for each other; readers sum them. Both are kept by the transaction that writes the fire
history and purged with it. The upgrade fills them (shard 0) from the history already stored
(one aggregate over ``schedule_fires``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from schedule_sdk.domain.history import LATENESS_BOUNDS

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _minute(dialect: str) -> str:
    """SQL for the minute of ``fired_at`` (SQLite stores it as fixed-width ISO text)."""
    if dialect == "sqlite":
        return "CAST(strftime('%s', substr(fired_at, 1, 19)) AS INTEGER) / 60"
    return "CAST(floor(extract(epoch FROM fired_at) / 60) AS INTEGER)"


def _lateness_class() -> str:
    whens = " ".join(f"WHEN lateness_ms <= {bound} THEN {i}" for i, bound in enumerate(LATENESS_BOUNDS))
    return f"CASE {whens} ELSE {len(LATENESS_BOUNDS)} END"


def upgrade() -> None:
    op.create_table(
        "schedule_fire_minutes",
        sa.Column("minute", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("lateness_class", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("shard", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("succeeded", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("skipped", sa.Integer, nullable=False),
    )
    op.create_table(
        "schedule_fire_failures",
        sa.Column("minute", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("topic", sa.String(200), primary_key=True),
        sa.Column("shard", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("failed", sa.Integer, nullable=False),
    )
    minute = _minute(op.get_bind().dialect.name)
    op.execute(
        "INSERT INTO schedule_fire_minutes (minute, lateness_class, shard, succeeded, failed, skipped) "
        f"SELECT {minute}, {_lateness_class()}, 0, "
        "SUM(CASE WHEN outcome = 'succeeded' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN outcome = 'failed' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN outcome = 'skipped' THEN 1 ELSE 0 END) "
        "FROM schedule_fires GROUP BY 1, 2"
    )
    op.execute(
        "INSERT INTO schedule_fire_failures (minute, topic, shard, failed) "
        f"SELECT {minute}, topic, 0, COUNT(*) FROM schedule_fires WHERE outcome = 'failed' GROUP BY 1, 2"
    )


def downgrade() -> None:
    op.drop_table("schedule_fire_failures")
    op.drop_table("schedule_fire_minutes")
