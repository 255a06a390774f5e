"""Fixtures for the port contract suites: one ``job_store`` per backend (memory, sqlite, postgres,
and postgres through PgBouncer in transaction pooling, whose watch listens on a direct URL).

SQL stores come with a ``reopen()`` that opens a second store (its own engine and connections)
on the same database, standing in for another process. Every SQL store is checked on teardown:
no connection may still be checked out of its pool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from schedule_sdk.adapters.memory import MemoryJobStore
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.ports import JobStore
from tests.support import services

STORES = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("pgbouncer", id="pgbouncer", marks=[pytest.mark.postgres, pytest.mark.pgbouncer]),
]


class StoreFactory:
    """Opens stores on one database and checks them all when the test ends."""

    def __init__(self, kind: str, url: str | None, direct_url: str | None = None) -> None:
        self.kind = kind
        self.url = url
        self.direct_url = direct_url  # "pgbouncer": the database without the pooler, for LISTEN
        self._opened: list[SQLAlchemyJobStore] = []
        self._memory: MemoryJobStore | None = None

    def open(self) -> JobStore:
        if self.url is None:
            # One in-memory store per test: "another process" is the same object.
            self._memory = self._memory or MemoryJobStore()
            return self._memory
        engine = make_engine(self.url, pool_size=5, pooler="transaction" if self.direct_url else "none")
        if not self._opened:
            schema.upgrade(engine)
        store = SQLAlchemyJobStore(engine, listen_url=self.direct_url)
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self._opened:
            claims = store.connections.claims
            engines = [store.engine] + ([claims] if claims is not None else [])
            checked_out = sum(e.pool.checkedout() for e in engines)  # type: ignore[attr-defined]
            checked_out -= store.connections.writer_conn is not None  # SQLite's one writer, kept open
            store.close()
            assert checked_out == 0, f"{checked_out} connection(s) still checked out"


def _url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    if kind in ("postgres", "pgbouncer"):
        return str(request.getfixturevalue("postgres_databases").lease("contracts"))
    return None


@pytest.fixture(params=STORES)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    url = _url(request.param, request, tmp_path)
    if request.param == "pgbouncer":
        request.getfixturevalue("pgbouncer")
        factory = StoreFactory(request.param, services.through_pgbouncer(str(url)), direct_url=url)
    else:
        factory = StoreFactory(request.param, url)
    yield factory
    factory.close_all()
    if url is not None and request.param != "sqlite":  # also ends PgBouncer's server sessions on it
        request.getfixturevalue("postgres_databases").give_back(url)


@pytest.fixture
def job_store(store_factory: StoreFactory) -> JobStore:
    return store_factory.open()


@pytest.fixture
def reopen(store_factory: StoreFactory) -> Callable[[], JobStore]:
    """Another store on the same database (another process's view)."""
    return store_factory.open
