"""The reminders the app has sent, in its own ``sent_reminders`` table (SQLAlchemy Core).

A real app would send an e-mail or a push notification here. Events arrive *at least once*, so
the table's primary key is the event's ``dedup_key``: a replayed fire is recorded once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

metadata = sa.MetaData()

sent_reminders = sa.Table(
    "sent_reminders",
    metadata,
    sa.Column("dedup_key", sa.String(80), primary_key=True),
    sa.Column("reminder_id", sa.String(36), nullable=False),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("due_at", sa.String(40), nullable=False),
    sa.Column("sent_at", sa.String(40), nullable=False),
)


#: The app's own record of a reminder, written in the same transaction as its job. A user cannot
#: have two identical reminders (same message, same time): the second insert fails, the
#: transaction rolls back, and the job scheduled in it never exists.
reminders = sa.Table(
    "reminders",
    metadata,
    sa.Column("job_id", sa.String(36), primary_key=True),
    sa.Column("user_id", sa.String(255), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("due_at", sa.String(40), nullable=False),
    sa.UniqueConstraint("user_id", "message", "due_at", name="uq_reminders_identical"),
)


def create_engine(url: str) -> Iterator[Engine]:
    """A ``providers.Resource``: the app's own engine, with its table created; disposed at shutdown."""
    engine = sa.create_engine(url)
    metadata.create_all(engine)
    yield engine
    engine.dispose()


class SentReminders:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def record(self, row: dict[str, Any]) -> bool:
        """Store one sent reminder; False if this ``dedup_key`` was already recorded."""
        try:
            with self._engine.begin() as conn:
                conn.execute(sent_reminders.insert().values(**row))
        except sa.exc.IntegrityError:
            return False
        return True

    def all(self) -> list[dict[str, Any]]:
        with self._engine.connect() as conn:
            rows = conn.execute(sa.select(sent_reminders).order_by(sent_reminders.c.sent_at))
            return [dict(r._mapping) for r in rows]
