"""``schema.HEAD_REVISION`` (what start-up compares the version table with, without Alembic) is the
head of the migration scripts."""

from __future__ import annotations

from schedule_sdk.adapters.sql import schema


def test_the_head_revision_constant_is_the_migration_scripts_head() -> None:
    assert schema.HEAD_REVISION == schema.head_revision()
