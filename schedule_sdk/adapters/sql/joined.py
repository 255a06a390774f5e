"""Writing job rows in the caller's SQLAlchemy transaction, and running code after it ends.

``connection_of`` turns the caller's ``Connection`` or ``Session`` into the ``Connection`` that
carries its transaction, after checking it reaches the database that holds the SDK's tables.
``after_transaction`` runs callbacks when that transaction ends:

- ``Session``: on ``after_commit`` of the outermost transaction, or when it ends without one
  (``after_transaction_end``), so a rollback, a failed commit or ``close()`` count as rolled back;
- ``Connection``: SQLAlchemy's ``commit`` event fires *before* the database's COMMIT, so the hook
  performs that COMMIT itself and then runs the callbacks (the COMMIT SQLAlchemy issues next is a
  no-op on the committed connection; an error of the COMMIT reaches the caller as from
  ``commit()``); ``rollback`` (also on ``close()`` of an open transaction) counts as rolled back.

:class:`SQLJoins` is the SQL job store's :class:`~schedule_sdk.ports.JoinableStore`: it writes
through those connections (or Django's connection, :mod:`.django`).

Savepoints are not tracked: a job written inside a savepoint that is rolled back alone still gets
its after-commit hand-off, which finds no row and does nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection

from schedule_sdk.adapters.sql import django
from schedule_sdk.adapters.sql.engine import translate_errors
from schedule_sdk.adapters.sql.transaction import JoinedSQLTransaction
from schedule_sdk.domain.errors import TransactionNotJoinable
from schedule_sdk.ports import JoinableStore, JoinedTransaction

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, SessionTransaction

logger = logging.getLogger(__name__)

_HOOKS = "schedule_sdk_after_transaction"


def _is_session(connection: object) -> TypeGuard[Session]:
    """Whether ``connection`` is an ORM ``Session``, without importing the ORM: a Session exists
    only where ``sqlalchemy.orm`` was imported."""
    orm = sys.modules.get("sqlalchemy.orm")
    return orm is not None and isinstance(connection, orm.Session)


def connection_of(connection: object, home: sa.URL) -> Connection:
    """The ``Connection`` carrying the caller's transaction (begun if it was not yet).

    :raises TransactionNotJoinable: not a Connection or Session, or not on the database ``home``.
    """
    if _is_session(connection):
        conn = connection.connection()
    elif isinstance(connection, Connection):
        conn = connection
    else:
        raise TransactionNotJoinable(
            f"connection= takes a SQLAlchemy Connection or Session, not {type(connection).__name__}"
        )
    check_database(conn.engine.url, home)
    return conn


def check_database(url: sa.URL, home: sa.URL) -> None:
    """:raises TransactionNotJoinable: ``url`` is not the database ``home`` (the job tables')."""
    if _database(url) != _database(home):
        raise TransactionNotJoinable(
            f"connection= is on {url.render_as_string()}, but the job tables are on "
            f"{home.render_as_string()}: the job cannot be written in that transaction"
        )


def _database(url: sa.URL) -> tuple[Any, ...]:
    if url.get_backend_name() == "sqlite":
        return ("sqlite", os.path.realpath(url.database or ""))
    return (url.get_backend_name(), url.host or "localhost", url.port or 5432, url.database)


@dataclass
class _Hooks:
    committed: list[Callable[[], None]] = field(default_factory=list)
    rolled_back: list[Callable[[], None]] = field(default_factory=list)

    def run(self, committed: bool) -> None:
        callbacks = self.committed if committed else self.rolled_back
        self.committed, self.rolled_back = [], []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # the caller's transaction is over: never fail its commit or rollback
                logger.exception("an after-transaction step of schedule_sdk failed")


_connection_hooks: weakref.WeakKeyDictionary[Connection, _Hooks] = weakref.WeakKeyDictionary()


def after_transaction(
    connection: object, committed: Callable[[], None], rolled_back: Callable[[], None]
) -> None:
    """Run ``committed`` after the caller's transaction commits, ``rolled_back`` if it does not."""
    hooks: _Hooks | None
    if _is_session(connection):
        hooks = connection.info.get(_HOOKS)
        if hooks is None:
            hooks = connection.info[_HOOKS] = _Hooks()
            _listen_session(connection, hooks)
    else:
        # Per Connection object: Connection.info belongs to the pooled DB-API connection and
        # outlives this checkout, while the event listeners are on this object only.
        conn = _connection(connection)
        hooks = _connection_hooks.get(conn)
        if hooks is None:
            hooks = _connection_hooks[conn] = _Hooks()
            _listen_connection(conn, hooks)
    hooks.committed.append(committed)
    hooks.rolled_back.append(rolled_back)


def _connection(connection: object) -> Connection:
    assert isinstance(connection, Connection)
    return connection


def _listen_session(session: Session, hooks: _Hooks) -> None:
    @event.listens_for(session, "after_commit")
    def _committed(session: Session) -> None:
        if session.get_nested_transaction() is None:  # the outermost transaction, not a savepoint
            hooks.run(committed=True)

    @event.listens_for(session, "after_transaction_end")
    def _ended(session: Session, transaction: SessionTransaction) -> None:
        if transaction.parent is None:  # still pending: the outermost transaction did not commit
            hooks.run(committed=False)


def _listen_connection(conn: Connection, hooks: _Hooks) -> None:
    @event.listens_for(conn, "commit")
    def _commit(conn: Connection) -> None:
        if not hooks.committed:
            return
        conn.dialect.do_commit(conn.connection)  # the event fires before COMMIT: commit first
        hooks.run(committed=True)

    @event.listens_for(conn, "rollback")
    def _rollback(conn: Connection) -> None:
        hooks.run(committed=False)


class SQLJoins(JoinableStore):
    """:class:`~schedule_sdk.ports.JoinableStore` for the SQL job store on ``home`` (its engine)."""

    def __init__(self, home: sa.Engine) -> None:
        self.home = home

    @contextlib.contextmanager
    def join(self, connection: object) -> Iterator[JoinedTransaction]:
        """Write through the caller's SQLAlchemy ``Connection`` or ``Session``, or Django's
        connection inside ``transaction.atomic()`` (on this store's database), in its transaction:
        this store's write lock is not taken, the caller commits or rolls back."""
        if django.is_django_connection(connection):
            check_database(django.url_of(connection), self.home.url)
            with translate_errors(), django.borrow(connection) as conn:
                yield JoinedSQLTransaction(conn, lambda done, _: django.on_commit(connection, done))
            return
        with translate_errors():
            conn = connection_of(connection, self.home.url)
        yield JoinedSQLTransaction(conn, lambda done, undone: after_transaction(connection, done, undone))
