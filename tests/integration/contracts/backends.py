"""The stores of this repository under the shipped JobStore contract suites: each test of a
``Test*`` class below runs on memory, SQLite and PostgreSQL (``store_factory`` in conftest.py)."""

from __future__ import annotations

import pytest

from schedule_sdk.ports import JobStore

from .conftest import StoreFactory


class OnEveryStore:
    """Mixed in before a contract class: its stores come from ``store_factory`` (which checks,
    when the test ends, that no connection is still checked out, and closes them)."""

    factory: StoreFactory

    @pytest.fixture(autouse=True)
    def _use_factory(self, store_factory: StoreFactory) -> None:
        self.factory = store_factory

    def open_store(self) -> JobStore:
        return self.factory.open()

    def reopen(self) -> JobStore:
        return self.factory.open()

    def close_stores(self) -> None:
        """``store_factory`` closes every store it opened."""
