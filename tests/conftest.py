"""Shared fixtures: one ``backend`` per store × substrate combination, on the real services
(and PostgreSQL with the rq substrate reaching Redis through Sentinel).

Every behaviour test takes ``backend`` and runs once per combination of :data:`CORE`: each store's
claims and transactions (SQLite, PostgreSQL) × each substrate (sql, rq), the four code paths. The
:data:`EDGES` run the same code over another connection (PostgreSQL through PgBouncer in
transaction pooling, Redis through Sentinel): a test marked ``every_backend`` (the fire path, the
caller's transaction, declared schedules, and a representative test of each other
family) runs on them too. A combination that needs a service fails loudly when the service is
down; nothing is skipped.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from tests.harness import Harness
from tests.support import services
from tests.support.sentinel import SentinelCluster

#: Fixtures shared by the integration and the process tests of the rq substrate and the timer.
pytest_plugins = ["tests.support.rq_fixtures", "tests.support.timer_fixtures"]


@dataclass
class Backend:
    """A store × substrate combination with fresh, isolated state for one test."""

    id: str
    store: str  # "sqlite" | "postgres" | "pgbouncer" (PostgreSQL through PgBouncer, transaction pooling)
    substrate: str  # "sql" | "rq"
    database_url: str
    redis_url: str | None = None
    #: "pgbouncer": the same database without the pooler (the workers' LISTEN connection).
    direct_url: str | None = None
    harnesses: list[Harness] = field(default_factory=list)
    service_kind: str = "sync"  # which service Harness.service is: "sync" or "async"
    #: The rq queue: shared by the harnesses and processes of one test (they are one app), and by
    #: no other test.
    rq_queue: str = field(default_factory=lambda: services.queue_name("sdk_test"))

    def settings(self, **overrides: Any) -> dict[str, Any]:
        values: dict[str, Any] = {
            "database_url": self.database_url,
            "substrate": self.substrate,
            "redis_url": self.redis_url,
            "poll_interval": 0.5,
            "lease_seconds": 5.0,
            "stop_timeout": 2.0,
        }
        if self.substrate == "rq":
            values["rq_queue"] = self.rq_queue
        if self.store == "pgbouncer":
            values["database_pooler"] = "transaction"
            values["database_listen_url"] = self.direct_url
        values.update(overrides)
        return values

    def env(self, **overrides: Any) -> dict[str, str]:
        """The same settings as environment variables, for subprocesses."""
        env = dict(os.environ)
        for key, value in self.settings(**overrides).items():
            if value is not None:
                env[f"SCHEDULE_{key.upper()}"] = str(value)
        return env

    def harness(self, **overrides: Any) -> Harness:
        harness = Harness(self.settings(**overrides), self.service_kind)
        self.harnesses.append(harness)
        return harness


SUBSTRATES: list[str] = ["sql", "rq"]
STORES: list[str] = ["sqlite", "postgres", "pgbouncer"]
#: The markers of each store (PgBouncer fronts the PostgreSQL server).
STORE_MARKS = {
    "sqlite": [pytest.mark.sqlite],
    "postgres": [pytest.mark.postgres],
    "pgbouncer": [pytest.mark.postgres, pytest.mark.pgbouncer],
}
COMBINATIONS = [
    pytest.param(
        (store, substrate),
        id=f"{store}-{substrate}",
        marks=[*STORE_MARKS[store], *([pytest.mark.redis] if substrate == "rq" else [])],
    )
    for substrate in SUBSTRATES
    for store in STORES
] + [
    # The rq substrate reaching Redis through Sentinel (``redis+sentinel://``), on a primary, a
    # replica and three Sentinels of the run's own (tests/support/sentinel.py).
    pytest.param(
        ("postgres", "rq-sentinel"),
        id="postgres-rq-sentinel",
        marks=[pytest.mark.postgres, pytest.mark.redis],
    )
]


#: The combinations that differ in code path: the whole behaviour suite runs on each.
CORE = [p for p in COMBINATIONS if p.id in ("sqlite-sql", "postgres-sql", "sqlite-rq", "postgres-rq")]
#: The same code paths over another connection: the tests marked ``every_backend`` run on these too.
EDGES = [p for p in COMBINATIONS if p not in CORE]
#: What a test of real processes (tests/processes/) runs on: the embedded end (SQLite, sql) and the
#: distributed end (PostgreSQL, rq). What it adds to the integration suite is the processes (killed,
#: paused, racing), not the code paths, which that suite covers on every combination; a process
#: test whose behaviour is a store's or a substrate's own is marked ``every_code_path`` (CORE).
PROCESS_ENDS = [p for p in COMBINATIONS if p.id in ("sqlite-sql", "postgres-rq")]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``backend`` (through ``backend_combination``) over :data:`CORE` (a process test:
    :data:`PROCESS_ENDS`), over every combination for a test marked ``every_backend``, or over CORE
    for one marked ``every_code_path``; a test that parametrizes ``backend_combination`` itself
    keeps its own choice."""
    if "backend_combination" not in metafunc.fixturenames:
        return
    marks = metafunc.definition.iter_markers("parametrize")
    if any(mark.args and mark.args[0] == "backend_combination" for mark in marks):
        return
    if metafunc.definition.get_closest_marker("every_backend") is not None:
        combinations = COMBINATIONS
    elif metafunc.definition.get_closest_marker("every_code_path") is not None:
        combinations = CORE
    elif metafunc.definition.nodeid.startswith("tests/processes/"):
        combinations = PROCESS_ENDS
    else:
        combinations = CORE
    metafunc.parametrize("backend_combination", combinations, indirect=True)


#: Run first (pytest-xdist hands tests out in this order): the tests whose every case starts
#: processes and waits on them, so no worker is left with a long one at the end of the run.
SLOW_FIRST = ("tests/processes/", "tests/integration/examples/", "tests/integration/cli/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the run: :data:`SLOW_FIRST` first, each in its collected order, then the rest."""

    def rank(item: pytest.Item) -> int:
        first = (i for i, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix))
        return next(first, len(SLOW_FIRST))

    items.sort(key=rank)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Fail the run when ``--dist loadgroup`` does not hold an ``xdist_group`` together: pytest-xdist
    marks a grouped test by adding ``@group`` to its node id, and a pytest it cannot do that on
    would hand a module's tests (and its module fixture: a browser, a filled database) to every
    worker."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if lost:
        message = (
            f"--dist loadgroup does not group {lost[0]} (and {len(lost) - 1} more): this pytest and "
            "pytest-xdist do not work together; see the pin in pyproject.toml"
        )
        sys.stderr.write(f"ERROR: {message}\n")  # a worker's error reaches no report of its own
        raise pytest.UsageError(message)


def migrate(url: str) -> None:
    """Bring the database at ``url`` to the latest schema (the template of a run's databases)."""
    engine = make_engine(url)
    schema.upgrade(engine)
    engine.dispose()


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[services.PostgresDatabases]:
    """Databases copied from a template migrated once per run (much faster than migrating each)."""
    services.require_postgres()
    databases = services.PostgresDatabases()
    databases.cleanup_stale()
    databases.create_template(migrate)
    yield databases
    databases.drop_all_within(services.DROP_ALL_SECONDS)


@pytest.fixture(scope="session")
def redis_base_url() -> Iterator[str]:
    services.require_redis()
    dbs = services.RedisDbs()
    url = dbs.allocate()
    yield url
    dbs.flush(url)
    dbs.release()


@pytest.fixture(scope="session")
def pgbouncer() -> None:
    """PgBouncer in transaction pooling on 127.0.0.1:6432; a run that needs it fails without it."""
    services.require_pgbouncer()


@pytest.fixture(scope="session")
def sentinel_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelCluster]:
    """A Redis primary, its replica and three Sentinels of this run's own, never failed over (the
    failover tests start clusters of their own)."""
    cluster = SentinelCluster(tmp_path_factory.mktemp("sentinel"))
    try:
        yield cluster.start()
    finally:
        cluster.close()


@pytest.fixture
def database_url_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """Fresh database URLs for one test; PostgreSQL ones are dropped when the test ends. A
    "pgbouncer" URL reaches a fresh PostgreSQL database through PgBouncer."""
    created: list[str] = []

    def make(store: str) -> str:
        if store == "sqlite":
            return f"sqlite:///{tmp_path / f'jobs{len(created)}.db'}"
        databases: services.PostgresDatabases = request.getfixturevalue("postgres_databases")
        url = databases.lease("t")
        created.append(url)
        if store == "pgbouncer":
            request.getfixturevalue("pgbouncer")
            return services.through_pgbouncer(url)
        return url

    yield make
    if created:
        databases: services.PostgresDatabases = request.getfixturevalue("postgres_databases")
        for url in created:
            databases.give_back(url)  # also ends PgBouncer's server sessions on it


def _backend(
    request: pytest.FixtureRequest, factory: Callable[[str], str], store: str, substrate: str
) -> Backend:
    redis_url = None
    if substrate == "rq":
        redis_url = request.getfixturevalue("redis_base_url")
        services.RedisDbs.flush(redis_url)
    elif substrate == "rq-sentinel":
        cluster: SentinelCluster = request.getfixturevalue("sentinel_cluster")
        cluster.client(cluster.primary()).flushdb()
        redis_url = cluster.url
    backend_id, substrate = f"{store}-{substrate}", substrate.removesuffix("-sentinel")
    url = factory(store)
    pooled = store == "pgbouncer"
    direct = url.replace(f":{services.PGBOUNCER_PORT}/", f":{services.PG_PORT}/") if pooled else None
    return Backend(backend_id, store, substrate, url, redis_url, direct_url=direct)


@pytest.fixture
def backend_combination(request: pytest.FixtureRequest) -> tuple[str, str]:
    """``(store, substrate)`` of this test's ``backend`` (parametrized by pytest_generate_tests)."""
    combination: tuple[str, str] = request.param
    return combination


@pytest.fixture
def backend(
    request: pytest.FixtureRequest,
    database_url_factory: Callable[[str], str],
    backend_combination: tuple[str, str],
) -> Iterator[Backend]:
    store, substrate = backend_combination
    backend = _backend(request, database_url_factory, store, substrate)
    yield backend
    for harness in backend.harnesses:
        harness.close()


@pytest.fixture(params=[pytest.param(s, id=f"postgres-{s}", marks=pytest.mark.postgres) for s in SUBSTRATES])
def postgres_backend(
    request: pytest.FixtureRequest, database_url_factory: Callable[[str], str]
) -> Iterator[Backend]:
    """The PostgreSQL store on each substrate (for tests that stop the PostgreSQL server)."""
    backend = _backend(request, database_url_factory, "postgres", request.param)
    yield backend
    for harness in backend.harnesses:
        harness.close()


@pytest.fixture(params=["sync", "async"])
def service_kind(request):
    """Run the test against ScheduleService and AsyncScheduleService (``Harness.service`` is the
    one named): a module opts in with ``pytestmark = pytest.mark.usefixtures("service_kind")``."""
    if "backend" in request.fixturenames:
        request.getfixturevalue("backend").service_kind = request.param
    return request.param


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Collect garbage before the end-of-run reports import anything. On CPython 3.11, a collection
    that runs finalizers while ``ast.parse`` builds its tree (pytest rewrites the asserts of a
    plugin imported that late) fails with "AST constructor recursion depth mismatch".

    A child process a test left running is killed and noted (services.end_leftover_children). A
    pytest-xdist worker hands its housekeeping notes to the controller, which prints them."""
    gc.collect()
    if not session.config.pluginmanager.hasplugin("dsession"):  # xdist's controller: its children are workers
        services.end_leftover_children()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["housekeeping"] = list(services.HOUSEKEEPING)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: take a finished worker's housekeeping notes."""
    services.HOUSEKEEPING.extend(getattr(node, "workeroutput", {}).get("housekeeping", []))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """What housekeeping left undone (services.housekeeping), in a section of its own: it never
    turns a passing test into an error."""
    if services.HOUSEKEEPING:
        terminalreporter.section("housekeeping")
        for note in services.HOUSEKEEPING:
            terminalreporter.line(note)
