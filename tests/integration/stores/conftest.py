"""Backends of the store tests that need one store and substrate only, not the suites' matrix."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Backend
from tests.conftest import _backend as backend_of


def _closed_after(backend: Backend) -> Iterator[Backend]:
    yield backend
    for harness in backend.harnesses:
        harness.close()


@pytest.fixture
def postgres_sql(request: pytest.FixtureRequest, database_url_factory) -> Iterator[Backend]:
    """PostgreSQL on the sql substrate (the settings of the suites' backend)."""
    yield from _closed_after(backend_of(request, database_url_factory, "postgres", "sql"))


@pytest.fixture
def pooled(request: pytest.FixtureRequest, database_url_factory) -> Iterator[Backend]:
    """PostgreSQL through PgBouncer on the sql substrate (the settings of the suites' backend)."""
    yield from _closed_after(backend_of(request, database_url_factory, "pgbouncer", "sql"))


@pytest.fixture(params=["postgres_sql", "pooled"])
def postgres_either(request: pytest.FixtureRequest) -> Backend:
    """PostgreSQL directly, then through PgBouncer (``postgres_sql``, ``pooled``)."""
    if request.param == "pooled":
        request.applymarker(pytest.mark.pgbouncer)
    backend: Backend = request.getfixturevalue(request.param)
    return backend
