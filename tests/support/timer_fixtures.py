"""Fixtures for the timer: a database per test (SQLite file or a fresh PostgreSQL database), timers
wired in-process or to the real NATS JetStream server with this run's own stream names."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.timer import Envelope, ScheduleTimer, Timer, TimerSettings
from tests.support import services
from tests.support.waiting import wait_until

_streams = itertools.count(1)


#: The tenant of :meth:`Received.settle`'s marker timers.
SETTLE_TENANT = "tests-settle"
_markers = itertools.count(1)


def due_in(ms: float) -> datetime:
    return datetime.now(UTC) + timedelta(milliseconds=ms)


def command(tenant: str = "tenant-a", call: str = "sc-1", ms: float = 200, **kw: Any) -> ScheduleTimer:
    return ScheduleTimer(tenant_id=tenant, service_call_id=call, due_at=due_in(ms), **kw)


@dataclass
class Received:
    """DueTimeReached envelopes collected by an in-process subscriber."""

    envelopes: list[Envelope] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, envelope: Envelope) -> None:
        with self.lock:
            self.envelopes.append(envelope)

    def keys(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(e.tenant_id, e.payload.service_call_id) for e in self.envelopes]

    def settle(self, timer: Timer) -> None:
        """Wait until ``timer`` has fired everything due before now: a marker timer of a tenant of
        its own, due at once, has been received (timers fire in due order). Its envelope is then
        dropped, so :attr:`envelopes` holds what the test sent only. For "nothing more arrives"
        checks, instead of sleeping for a while."""
        marker = f"settle-{next(_markers)}"
        timer.schedule(ScheduleTimer(tenant_id=SETTLE_TENANT, service_call_id=marker, due_at=due_in(0)))
        assert wait_until(lambda: (SETTLE_TENANT, marker) in self.keys()), "the marker timer never fired"
        with self.lock:
            self.envelopes[:] = [e for e in self.envelopes if e.tenant_id != SETTLE_TENANT]


@pytest.fixture(
    params=[
        pytest.param("sqlite"),
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("pgbouncer", marks=[pytest.mark.postgres, pytest.mark.pgbouncer]),
    ]
)
def timer_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A TIMER_DB_PATH value: a SQLite file, or the URL of an empty PostgreSQL database, directly
    or ("pgbouncer") through PgBouncer in transaction pooling (the timer then needs
    :func:`store_settings`' pooler settings)."""
    if request.param == "sqlite":
        yield str(tmp_path / "event_service.db")
        return
    databases: services.PostgresDatabases = request.getfixturevalue("empty_postgres_databases")
    url = databases.lease("timer_suite")
    if request.param == "pgbouncer":
        request.getfixturevalue("pgbouncer")
        yield services.through_pgbouncer(url)
    else:
        yield url
    databases.give_back(url)  # also ends PgBouncer's server sessions on it


def pooled(db_path: str) -> bool:
    """Whether the TIMER_DB_PATH ``db_path`` reaches PostgreSQL through the test PgBouncer."""
    return f":{services.PGBOUNCER_PORT}/" in db_path


def direct_url(db_path: str) -> str:
    """The database of ``db_path`` without the pooler (for LISTEN and for the tests' own reads)."""
    return db_path.replace(f":{services.PGBOUNCER_PORT}/", f":{services.PG_PORT}/")


def store_settings(db_path: str) -> dict[str, Any]:
    """The TimerSettings of the store at ``db_path``: behind PgBouncer, as the production how-to
    says (``database_pooler=transaction``, LISTEN on a direct connection)."""
    values: dict[str, Any] = {"db_path": db_path}
    if pooled(db_path):
        values.update(database_pooler="transaction", database_listen_url=direct_url(db_path))
    return values


def store_env(db_path: str) -> dict[str, str]:
    """:func:`store_settings` as TIMER_* environment variables."""
    return {f"TIMER_{key.upper()}": str(value) for key, value in store_settings(db_path).items()}


def store_engine(db_path: str) -> Engine:
    """An engine on the store at ``db_path`` (through the pooler, set up for it)."""
    url = db_path if "://" in db_path else f"sqlite:///{db_path}"
    return make_engine(url, pooler="transaction" if pooled(db_path) else "none")


@pytest.fixture(scope="session")
def empty_postgres_databases() -> Iterator[services.PostgresDatabases]:
    """Empty databases (no template): the timer tests run the migrations themselves, some with
    the service_calls foreign key option."""
    services.require_postgres()
    databases = services.PostgresDatabases()
    yield databases
    databases.drop_all_within(services.DROP_ALL_SECONDS)


@pytest.fixture
def make_timer(timer_db: str) -> Iterator[Callable[..., Timer]]:
    """Build (not start) timers on this test's database; closed at teardown."""
    made: list[Timer] = []

    def make(metrics: Any = None, **overrides: Any) -> Timer:
        values: dict[str, Any] = {
            **store_settings(timer_db),
            "broker_url": "inprocess",
            "polling_interval_ms": 500,
            "lease_seconds": 2.0,
            "retry_delay_ms": 100,
            "heal_interval": 0,
        }
        values.update(overrides)
        timer = Timer(TimerSettings.load(values, environ={}), metrics=metrics)
        made.append(timer)
        return timer

    yield make
    for timer in made:
        timer.close()


@pytest.fixture(scope="session")
def nats_prefix() -> Iterator[str]:
    services.require_nats()
    prefix = services.nats_stream_prefix() + "_TIMER"
    yield prefix
    services.delete_nats_streams(prefix)


@pytest.fixture
def nats_names(nats_prefix: str) -> dict[str, str]:
    """This test's own stream, subject and consumer names (TimerSettings keys)."""
    n = next(_streams)
    subject = f"{services.nats_subject_prefix()}.timer{n}"
    return {
        "broker_url": services.NATS_URL,
        "command_stream": f"{nats_prefix}_{n}_CMD",
        "command_subject": f"{subject}.commands",
        "event_stream": f"{nats_prefix}_{n}_EVT",
        "event_subject": f"{subject}.events",
        "consumer": f"timer{n}",
        "dead_letter_subject": f"{subject}.dead",
    }
