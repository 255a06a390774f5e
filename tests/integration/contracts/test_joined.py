"""The joined-transaction contract (schedule_sdk/testing/contracts/joined.py) on every store of the
SDK: the caller's connection is a SQLAlchemy ``Connection`` of an engine of its own on SQLite and
PostgreSQL (as an app's), a ``MemoryConnection`` on the in-memory store."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from schedule_sdk.adapters.memory import MemoryJobStore
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.testing.contracts.joined import JoinedTransactionContract

from .backends import OnEveryStore


class TestJoinedTransaction(OnEveryStore, JoinedTransactionContract):
    _engines: list[Engine]

    def open_connection(self) -> Any:
        store = self.job_store
        if isinstance(store, MemoryJobStore):
            return store.connection()
        assert self.factory.url is not None
        engine = make_engine(self.factory.url, pool_size=1)
        self._engines.append(engine)
        connection = engine.connect()
        connection.begin()
        return connection

    def setup_method(self, method: object) -> None:
        super().setup_method(method)
        self._engines = []

    def teardown_method(self, method: object) -> None:
        super().teardown_method(method)
        for engine in self._engines:
            engine.dispose()
