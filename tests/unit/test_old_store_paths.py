"""The old import paths of the stores (``schedule_sdk.adapters.stores.*``) still work, with a warning."""

from __future__ import annotations

import importlib

import pytest

from schedule_sdk.adapters import memory
from schedule_sdk.adapters.sql import engine, schema, store, timers
from schedule_sdk.adapters.sql.fast import pg_claims

MOVED = [
    ("sqlalchemy", "SQLAlchemyJobStore", store.SQLAlchemyJobStore),
    ("sqlalchemy", "from_row", store.from_row),
    ("sqlalchemy", "NOTIFY_CHANNEL", store.NOTIFY_CHANNEL),
    ("sqlalchemy_timers", "SQLAlchemyTimerStore", timers.SQLAlchemyTimerStore),
    ("memory", "MemoryJobStore", memory.MemoryJobStore),
    ("engine", "make_engine", engine.make_engine),
    ("schema", "upgrade", schema.upgrade),
    ("pg_claims", "CLAIM_DUE", pg_claims.CLAIM_DUE),
]


@pytest.mark.parametrize(("module", "name", "moved"), MOVED, ids=lambda v: v if isinstance(v, str) else "")
def test_an_old_path_gives_the_moved_object_with_a_deprecation_warning(
    module: str, name: str, moved: object
) -> None:
    old = importlib.import_module(f"schedule_sdk.adapters.stores.{module}")
    with pytest.warns(
        DeprecationWarning, match=rf"adapters\.stores\.{module} is deprecated: import {name} from"
    ):
        assert getattr(old, name) is moved


def test_the_old_from_import_works() -> None:
    with pytest.warns(DeprecationWarning, match="SQLAlchemyJobStore"):
        from schedule_sdk.adapters.stores.sqlalchemy import SQLAlchemyJobStore
    assert SQLAlchemyJobStore is store.SQLAlchemyJobStore


def test_a_name_the_new_module_lacks_is_an_attribute_error() -> None:
    old = importlib.import_module("schedule_sdk.adapters.stores.sqlalchemy")
    with pytest.raises(AttributeError, match="no_such_name"):
        old.no_such_name  # noqa: B018
