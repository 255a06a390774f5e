"""The declared rows contract (schedule_sdk/testing/contracts/declared_rows.py) on every store of
the SDK: the in-memory store keeps the declarations itself; the SQL stores in the
``schedule_declared`` table."""

from __future__ import annotations

from schedule_sdk.adapters.sql.declared import SQLAlchemyDeclaredRows
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.ports import DeclaredRows, JobStore
from schedule_sdk.testing.contracts.declared_rows import DeclaredRowsContract

from .backends import OnEveryStore


class TestDeclaredRows(OnEveryStore, DeclaredRowsContract):
    def open_rows(self, store: JobStore) -> DeclaredRows:
        if isinstance(store, SQLAlchemyJobStore):
            return SQLAlchemyDeclaredRows(store.engine)
        return super().open_rows(store)
