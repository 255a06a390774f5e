"""A dashboard on a real SQL store (SQLite file, or PostgreSQL) with a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from schedule_sdk import FireOutcome, FireRecord, OneShotSpec, ScheduleService
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.dashboard import create_dashboard
from schedule_sdk.substrates.sql.queue import SQLExecutionQueue
from schedule_sdk.testing import FakeClock

T0 = datetime(2030, 3, 4, 12, 0, tzinfo=UTC)


class Client:
    """A synchronous client of an ASGI app in this process, keeping cookies like a browser
    (httpx's ASGI transport; Starlette's own test client is deprecated with httpx)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.cookies = httpx.Cookies()

    def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://127.0.0.1", cookies=self.cookies
            ) as client:
                response = await client.request(method, path, **options)
                self.cookies = client.cookies
                return response

        return asyncio.run(send())

    def get(self, path: str, **options: Any) -> httpx.Response:
        return self.request("GET", path, follow_redirects=True, **options)

    def post(self, path: str, **options: Any) -> httpx.Response:
        options.setdefault("follow_redirects", True)
        return self.request("POST", path, **options)


@dataclass
class Site:
    service: ScheduleService
    store: SQLAlchemyJobStore
    clock: FakeClock
    url: str

    def client(self, **options: object) -> Client:
        return Client(create_dashboard(self.service, store=self.store, clock=self.clock, **options))  # type: ignore[arg-type]

    def one_shot(self, **spec: object) -> str:
        values: dict[str, object] = {
            "topic": "dash.test",
            "timezone": "UTC",
            "run_at": T0 + timedelta(hours=1),
        }
        values.update(spec)
        return self.service.schedule_at(OneShotSpec(**values)).id  # type: ignore[arg-type]

    def fires(self, *records: FireRecord) -> None:
        with self.store.transaction() as tx:
            tx.record_fires(list(records))


def fire(job_id: str, fired_at: datetime, lateness_ms: int = 5, **changes: object) -> FireRecord:
    values: dict[str, object] = {
        "job_id": job_id,
        "topic": "dash.test",
        "occurrence": 1,
        "attempt": 1,
        "due_at": fired_at - timedelta(milliseconds=lateness_ms),
        "fired_at": fired_at,
        "lateness_ms": lateness_ms,
        "duration_ms": 3,
        "outcome": FireOutcome.SUCCEEDED,
        "error": None,
        "worker_id": "host-a:11:abcd",
    }
    values.update(changes)
    return FireRecord(**values)  # type: ignore[arg-type]


def open_site(url: str) -> Site:
    engine = make_engine(url, pool_size=4)
    schema.upgrade(engine)
    store = SQLAlchemyJobStore(engine)
    clock = FakeClock(T0)
    service = ScheduleService(store=store, queue=SQLExecutionQueue(), clock=clock)
    return Site(service, store, clock, url)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    opened = open_site(f"sqlite:///{tmp_path / 'jobs.db'}")
    yield opened
    opened.store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_site(request: pytest.FixtureRequest, database_url_factory: Callable[[str], str]) -> Iterator[Site]:
    opened = open_site(database_url_factory(request.param))
    yield opened
    opened.store.close()
