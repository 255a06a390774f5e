"""A freed concurrency slot is announced as such.

Revision ID: 0023
Revises: 0022

PostgreSQL only: the notification sent when a row with a concurrency key stops being active (its
slot frees, migration 0017) carries ``slot`` instead of the row's due instant. A poller can then
tell it from a job becoming pending (whose payload stays the due instant) and skip the claim when
its last one left nothing waiting for a slot. A listener of an earlier release reads the new
payload as "something changed" and claims, as it did before.
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_FUNCTION = """
CREATE OR REPLACE FUNCTION schedule_sdk_notify_slot() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('schedule_sdk_jobs', {payload});
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
_BEFORE = """to_char(OLD.run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION.format(payload="'slot'"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION.format(payload=_BEFORE))
