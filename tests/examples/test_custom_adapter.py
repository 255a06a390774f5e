"""The adapters of tests/examples/custom_adapter.py pass the acceptance tests an adapter must pass.

1. The JobStore contract suite (tests/contracts), collected here against ``MeteredJobStore``
   wrapped around the in-memory and the SQLite store.
2. A real worker with all three adapters plugged into the container fires, retries a failed
   listener as a whole, and records what it did.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    Backoff,
    ListenerRegistry,
    OneShotSpec,
    RetryPolicy,
    ScheduleArrivedEvent,
    ScheduleContainer,
)
from schedule_sdk.adapters.stores import schema
from schedule_sdk.adapters.stores.engine import make_engine
from schedule_sdk.adapters.stores.memory import MemoryJobStore
from schedule_sdk.adapters.stores.sqlalchemy import SQLAlchemyJobStore
from schedule_sdk.ports import JobStore
from tests.contracts import test_job_store, test_job_store_claims

from .custom_adapter import (
    JsonLinesEventPublisher,
    MeteredExecutionQueue,
    MeteredJobStore,
    use_custom_adapters,
)
from .support import wait_for

# -- 1. the contract suite, collected in this module against MeteredJobStore ---------------------


def _contract_items() -> dict[str, object]:
    """Every test and fixture of the contract modules, minus the SQL-only ones (store_factory)."""
    items: dict[str, object] = {}
    for module in (test_job_store, test_job_store_claims):
        for name, value in vars(module).items():
            if type(value).__name__ == "FixtureFunctionDefinition":
                items[name] = value
            elif name.startswith("test_") and "store_factory" not in inspect.signature(value).parameters:
                items[name] = value
    return items


globals().update(_contract_items())


@pytest.fixture(params=["memory", "sqlite"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], JobStore]]:
    """Opens a MeteredJobStore on one shared backing store (a second one is "another process")."""
    opened: list[SQLAlchemyJobStore] = []
    memory = MemoryJobStore()

    def open_store() -> JobStore:
        if request.param == "memory":
            return MeteredJobStore(memory)
        engine = make_engine(f"sqlite:///{tmp_path / 'jobs.db'}", pool_size=5)
        schema.upgrade(engine)
        opened.append(SQLAlchemyJobStore(engine))
        return MeteredJobStore(opened[-1])

    yield open_store
    for store in opened:
        store.close()


@pytest.fixture
def job_store(reopen: Callable[[], JobStore]) -> JobStore:
    return reopen()


def test_the_contract_suite_is_collected_here() -> None:
    assert len([name for name in _contract_items() if name.startswith("test_")]) >= 20


# -- 2. a worker with all three adapters ---------------------------------------------------------


def test_a_worker_runs_on_the_custom_adapters(tmp_path: Path) -> None:
    events_file = tmp_path / "events.jsonl"
    container = ScheduleContainer()
    container.config.from_dict({"database_url": f"sqlite:///{tmp_path / 'jobs.db'}", "poll_interval": 0.2})
    registry: ListenerRegistry = container.listeners()
    use_custom_adapters(container, events_file)

    attempts: list[int] = []
    done = threading.Event()

    def flaky(event: ScheduleArrivedEvent) -> None:
        attempts.append(event.attempt)
        if event.attempt == 1:
            raise RuntimeError("the mail server is down")  # -> ListenerFailed: the fire is retried
        done.set()

    registry.connect(SCHEDULE_ARRIVED_EVENT, flaky)
    spec = OneShotSpec(
        topic="reports.daily",
        run_at=datetime.now(UTC) + timedelta(milliseconds=300),
        timezone="UTC",
        retry=RetryPolicy(attempts=2, backoff=Backoff(type="fixed", delay_ms=100)),
    )
    with container.worker():
        job = container.schedule_service().schedule_at(spec)
        wait_for(done.is_set, "the retried fire")
        service = container.schedule_service()
        wait_for(lambda: service.get_by_id(job.id).status.value == "completed", "the job to complete")
    container.shutdown_resources()

    assert attempts == [1, 2]
    lines = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert [(e["scheduled_job_id"], e["attempt"]) for e in lines] == [(job.id, 1), (job.id, 2)]
    store, queue = container.store(), container.queue()
    assert isinstance(store, MeteredJobStore) and isinstance(queue, MeteredExecutionQueue)
    assert isinstance(container.publisher(), JsonLinesEventPublisher)
    assert store.calls["claim_due"] >= 1
    assert queue.calls["enqueue"] >= 2  # the job, then its retry
