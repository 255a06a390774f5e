"""Writing job rows through Django's own database connection, inside ``transaction.atomic()``.

A SQLAlchemy ``Connection`` is laid over the DB-API connection Django holds (one engine per Django
database alias, cached): its statements are the store's own, run in Django's transaction. The
bridge never ends that transaction: its COMMIT and ROLLBACK are no-ops and returning the borrowed
connection neither closes nor resets it; Django commits or rolls back. After-commit steps go
through ``transaction.on_commit``; Django has no hook for a rollback, so a rolled-back job's
steps are simply dropped (what they would undo is then healed like any abandoned hand-off).

Django is imported only when a Django connection is passed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from schedule_sdk.domain.errors import TransactionNotJoinable

_engines: dict[tuple[str, str], Engine] = {}
_lock = threading.Lock()
_lending = threading.local()  # the Django connection being borrowed on this thread (Django's are per thread)


def is_django_connection(connection: object) -> bool:
    """Whether ``connection`` is a Django ``DatabaseWrapper`` (``django.db.connection(s[alias])``)."""
    return hasattr(connection, "in_atomic_block") and hasattr(connection, "settings_dict")


def url_of(wrapper: Any) -> sa.URL:
    """The SQLAlchemy URL of the database a Django connection reaches."""
    settings = wrapper.settings_dict
    if wrapper.vendor == "sqlite":
        return sa.URL.create("sqlite", database=str(settings["NAME"]))
    if wrapper.vendor == "postgresql":
        return sa.URL.create(
            "postgresql+psycopg",
            username=settings.get("USER") or None,
            host=settings.get("HOST") or None,
            port=int(settings["PORT"]) if settings.get("PORT") else None,
            database=settings.get("NAME"),
        )
    raise TransactionNotJoinable(f"connection= on Django's {wrapper.vendor!r} backend is not supported")


def borrow(wrapper: Any) -> Connection:
    """A SQLAlchemy ``Connection`` on Django's DB-API connection, in its open atomic block.

    :raises TransactionNotJoinable: not inside ``transaction.atomic()`` on this connection.
    """
    if not wrapper.in_atomic_block:
        raise TransactionNotJoinable(
            f"connection= with Django's {wrapper.alias!r} connection needs transaction.atomic()"
        )
    wrapper.ensure_connection()
    _lending.wrapper = wrapper
    try:
        return _engine(wrapper).connect()
    finally:
        _lending.wrapper = None


@contextlib.contextmanager
def lent_engine(wrapper: Any) -> Iterator[Engine]:
    """An engine whose one connection is the DB-API connection a Django connection holds, for
    work Django runs outside a transaction (``manage.py migrate`` upgrading the SDK's tables): its
    statements run on Django's connection, in its autocommit mode; the connection stays open."""
    wrapper.ensure_connection()
    engine = sa.create_engine(
        url_of(wrapper),
        creator=lambda: wrapper.connection,
        poolclass=_BorrowedPool,
        pool_reset_on_return=None,
    )
    yield engine  # nothing to dispose: the pool keeps no connection of its own


def on_commit(wrapper: Any, committed: Callable[[], None]) -> None:
    from django.db import transaction

    transaction.on_commit(committed, using=wrapper.alias, robust=True)


def _engine(wrapper: Any) -> Engine:
    key = (wrapper.alias, wrapper.vendor)
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            engine = sa.create_engine(
                url_of(wrapper),
                creator=lambda: _lending.wrapper.connection,  # the DB-API connection Django holds now
                poolclass=_BorrowedPool,
                pool_reset_on_return=None,
            )
            # Django owns the transaction: the bridge never ends it.
            engine.dialect.do_commit = _nothing  # type: ignore[method-assign]
            engine.dialect.do_rollback = _nothing  # type: ignore[method-assign]
            _engines[key] = engine
        return engine


def _nothing(dbapi_connection: Any) -> None:
    return None


class _BorrowedPool(NullPool):
    """Hands out Django's DB-API connection and, on return, leaves it open (it is Django's)."""

    def _do_return_conn(self, record: Any) -> None:
        return None
