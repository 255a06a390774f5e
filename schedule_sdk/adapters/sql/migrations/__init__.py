"""Alembic migrations of the SDK's tables (version table ``schedule_sdk_alembic_version``)."""
