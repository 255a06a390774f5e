"""PostgreSQL: a worker opens its claims' session as it starts, so its first fire does not wait
for a connection to be opened (on the ``rq`` substrate nothing else would claim before it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Backend

pytestmark = pytest.mark.postgres


def test_a_fresh_store_opens_its_claims_session_when_warmed(postgres_backend: Backend) -> None:
    store: Any = postgres_backend.harness().store
    assert store.connections.claims.pool.checkedin() == 0  # nothing claimed yet: nothing opened
    store.warm()
    assert store.connections.claims.pool.checkedin() == 1


def test_a_started_worker_holds_a_claims_session_before_its_first_claim(postgres_backend: Backend) -> None:
    h = postgres_backend.harness()
    store: Any = h.store
    h.start()
    try:
        assert store.connections.claims.pool.checkedin() + store.connections.claims.pool.checkedout() >= 1
    finally:
        h.stop()
