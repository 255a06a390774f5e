"""JobStore checks only the SQL stores can make: another process's writes wake a watcher."""

from __future__ import annotations

import threading

import pytest

from .conftest import StoreFactory
from .jobs import insert, job


@pytest.mark.parametrize(
    "store_factory",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("pgbouncer", marks=[pytest.mark.postgres, pytest.mark.pgbouncer]),
    ],
    indirect=True,
)
def test_sql_stores_watch_hears_another_process_schedule_a_job(store_factory: StoreFactory) -> None:
    watcher, writer = store_factory.open(), store_factory.open()
    heard = threading.Event()
    stop = watcher.watch(lambda due: heard.set())
    try:
        for _ in range(50):  # the watcher may take a moment to start listening
            insert(writer, job())
            if heard.wait(0.2):
                break
        assert heard.is_set()
    finally:
        stop()
