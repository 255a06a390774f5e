"""Alembic environment: always run programmatically by :mod:`schedule_sdk.adapters.sql.schema`."""

from __future__ import annotations

from alembic import context

from schedule_sdk.adapters.sql.schema import VERSION_TABLE
from schedule_sdk.adapters.sql.tables import metadata, postgresql_indexes

connection = context.config.attributes["connection"]
if connection.dialect.name == "postgresql":  # the metadata as the migrations make it there
    postgresql_indexes()
context.configure(connection=connection, target_metadata=metadata, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
