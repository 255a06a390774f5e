"""The backends the example apps run on in these tests: SQLite (the default), PostgreSQL, and
PostgreSQL + Redis."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import services


@dataclass(frozen=True)
class AppBackend:
    id: str
    database_url: str
    redis_url: str | None = None
    rq_queue: str | None = None  # this backend's own queue (with Redis)

    def env(self) -> dict[str, str | None]:
        """What a user sets: the database URL and, for Redis, the Redis URL (+ this backend's own queue)."""
        values: dict[str, str | None] = {"SCHEDULE_DATABASE_URL": self.database_url}
        if self.redis_url:
            values["SCHEDULE_REDIS_URL"] = self.redis_url
            values["SCHEDULE_RQ_QUEUE"] = self.rq_queue
        return values


APP_BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("postgres-redis", id="postgres-redis", marks=[pytest.mark.postgres, pytest.mark.redis]),
]


def make_backend(kind: str, request: pytest.FixtureRequest, directory: Path) -> AppBackend:
    if kind == "sqlite":
        return AppBackend(kind, f"sqlite:///{directory / 'app.db'}")
    databases: services.PostgresDatabases = request.getfixturevalue("postgres_databases")
    url = databases.lease("examples")
    if kind == "postgres":
        return AppBackend(kind, url)
    redis_url: str = request.getfixturevalue("redis_base_url")
    services.RedisDbs.flush(redis_url)
    return AppBackend(kind, url, redis_url, services.queue_name("examples"))


@pytest.fixture(scope="module", params=APP_BACKENDS)
def app_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AppBackend]:
    backend = make_backend(request.param, request, tmp_path_factory.mktemp(request.param))
    yield backend
    give_back(backend, request)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``fresh_backend`` runs on the module's ``APP_BACKENDS`` when it names its own (a subset of
    this one), else on all of these."""
    if "fresh_backend" in metafunc.fixturenames:
        params = getattr(metafunc.module, "APP_BACKENDS", APP_BACKENDS)
        metafunc.parametrize("fresh_backend", params, indirect=True)


@pytest.fixture
def fresh_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AppBackend]:
    """Like ``app_backend``, but a new database (and Redis db flush) for each test."""
    backend = make_backend(request.param, request, tmp_path)
    yield backend
    give_back(backend, request)


def give_back(backend: AppBackend, request: pytest.FixtureRequest) -> None:
    """Return a PostgreSQL backend's database to the pool (its connections are ended)."""
    if backend.id != "sqlite":
        request.getfixturevalue("postgres_databases").give_back(backend.database_url)
