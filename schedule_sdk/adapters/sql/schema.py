"""Create or upgrade the SDK's tables with its Alembic migrations.

The SDK keeps its own version table (:data:`VERSION_TABLE`), so its migrations never collide
with the host application's. ``upgrade`` is safe to call from several processes at once: on
PostgreSQL it holds an advisory lock, on SQLite a ``BEGIN IMMEDIATE`` write lock.

Alembic is imported by these functions, not with the module, so ``import schedule_sdk`` does not
load it; ``upgrade`` of a schema already at :data:`HEAD_REVISION` (every start-up but the first)
reads the version table with one query and loads no Alembic at all.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import text
from sqlalchemy.engine import Engine

from schedule_sdk.adapters.sql.engine import WRITE, translate_errors

if TYPE_CHECKING:
    from alembic.config import Config

VERSION_TABLE = "schedule_sdk_alembic_version"
#: The newest migration's revision (what :func:`head_revision` reads from the migration scripts;
#: a test holds the two equal).
HEAD_REVISION = "0024"
_LOCK_KEY = 0x5C4ED_5D4  # arbitrary constant for pg_advisory_xact_lock


def _setup_chatter(record: logging.LogRecord) -> bool:
    """False for Alembic's set-up lines ("setup plugin ...", "Context impl ...", "Will assume ...")
    below WARNING, unless Alembic's logger shows DEBUG; its "Running upgrade" lines stay."""
    return (
        record.levelno >= logging.WARNING
        or record.getMessage().startswith("Running ")
        or logging.getLogger("alembic").isEnabledFor(logging.DEBUG)
    )


@contextlib.contextmanager
def _quiet_setup() -> Iterator[None]:
    """While the SDK runs Alembic: its set-up lines only at DEBUG (every start at ``-v`` printed
    them), each migration step at INFO. The host's own Alembic runs are left as they are. Alembic
    is imported inside it: its first import sets its plugins up, a line each."""
    loggers = [logging.getLogger(name) for name in ("alembic.runtime.plugins", "alembic.runtime.migration")]
    for each in loggers:
        each.addFilter(_setup_chatter)
    try:
        yield
    finally:
        for each in loggers:
            each.removeFilter(_setup_chatter)


def _config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", "schedule_sdk.adapters.sql:migrations")
    return config


def head_revision() -> str | None:
    with _quiet_setup():
        from alembic.script import ScriptDirectory

        return ScriptDirectory.from_config(_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with _quiet_setup(), translate_errors(), engine.connect() as conn:
        from alembic.runtime.migration import MigrationContext

        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


def _stored_revision(engine: Engine) -> str | None:
    """The revision in the version table, read without Alembic (None: no table, or not one row)."""
    with translate_errors(), engine.connect() as conn:
        if not sa.inspect(conn).has_table(VERSION_TABLE):
            return None
        rows = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    return str(rows[0]) if len(rows) == 1 else None


def upgrade(engine: Engine, revision: str = "head", *, attributes: Mapping[str, Any] | None = None) -> None:
    """Bring the schema to ``revision`` (default: the latest). A no-op when already there.

    ``attributes`` are options the migrations read from ``context.config.attributes``, e.g.
    ``{"timer_service_calls_fk": True}`` (they apply only to migrations not yet applied)."""
    if revision == "head" and _stored_revision(engine) == HEAD_REVISION:
        return
    if revision == "head" and current_revision(engine) == head_revision():
        return
    with _quiet_setup(), translate_errors(), engine.connect() as conn:
        from alembic import command

        config = _config()
        conn.execution_options(**{WRITE: True})
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
            config.attributes.update(attributes or {})
            config.attributes["connection"] = conn
            command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Bring the schema down to ``revision`` (default: no SDK table left)."""
    with _quiet_setup(), translate_errors(), engine.connect() as conn:
        from alembic import command

        config = _config()
        conn.execution_options(**{WRITE: True})
        with conn.begin():
            config.attributes["connection"] = conn
            command.downgrade(config, revision)
