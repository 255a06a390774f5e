"""The adapters of ``custom_adapter.py`` (next to this file) pass the acceptance tests an adapter must pass.

1. The contract suites shipped in ``schedule_sdk.testing.contracts`` of the JobStore port and of
   the capabilities ``MeteredJobStore`` declares (worker registry, retention), subclassed here for
   ``MeteredJobStore`` wrapped around the in-memory and the SQLite store.
2. A real worker with all three adapters plugged into the container fires, retries a failed
   listener as a whole, and records what it did.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    Backoff,
    ListenerRegistry,
    OneShotSpec,
    RetryPolicy,
    ScheduleArrivedEvent,
    ScheduleContainer,
)
from schedule_sdk.adapters.memory import MemoryJobStore
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.ports import JobStore
from schedule_sdk.testing.contracts.job_store import (
    JobStoreContract,
    JobStoreRetentionContract,
    WorkerRegistryContract,
)
from tests.support.waiting import wait_for

from .custom_adapter import (
    JsonLinesEventPublisher,
    MeteredExecutionQueue,
    MeteredJobStore,
    use_custom_adapters,
)


# -- 1. the contract suite, run here against MeteredJobStore -----------------------------------
# --8<-- [start:contract]
class TestMeteredJobStoreInMemory(JobStoreContract, WorkerRegistryContract, JobStoreRetentionContract):
    """The suites of the JobStore port and of the capabilities MeteredJobStore declares, on
    MeteredJobStore around the in-memory store."""

    def open_store(self) -> JobStore:
        return MeteredJobStore(MemoryJobStore())


class TestMeteredJobStoreOnSQLite(JobStoreContract, WorkerRegistryContract, JobStoreRetentionContract):
    """The same suites on MeteredJobStore around SQLite; ``reopen`` is another process's view."""

    def setup_method(self, method: object) -> None:
        super().setup_method(method)
        self.path = Path(tempfile.mkdtemp()) / "jobs.db"
        self.opened: list[JobStore] = []

    def open_store(self) -> JobStore:
        engine = make_engine(f"sqlite:///{self.path}", pool_size=5)
        schema.upgrade(engine)
        self.opened.append(MeteredJobStore(SQLAlchemyJobStore(engine)))
        return self.opened[-1]

    reopen = open_store  # another store on the same file: "another process"

    def close_stores(self) -> None:
        for store in self.opened:
            store.close()
        shutil.rmtree(self.path.parent, ignore_errors=True)


# --8<-- [end:contract]


def test_the_contract_suite_is_collected_here() -> None:
    tests = [name for name in dir(JobStoreContract) if name.startswith("test_")]
    assert len(tests) >= 30
    assert all(callable(getattr(TestMeteredJobStoreOnSQLite, name)) for name in tests)


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
    with container.worker():  # starting it may take longer than the job's 300 ms on a busy machine
        spec = OneShotSpec(
            topic="reports.daily",
            run_at=datetime.now(UTC) + timedelta(milliseconds=300),
            timezone="UTC",
            retry=RetryPolicy(attempts=2, backoff=Backoff(type="fixed", delay_ms=100)),
        )
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
    assert store.calls["beat"] >= 1  # the worker registers through the declared WorkerRegistry
    assert queue.calls["enqueue"] >= 2  # the job, then its retry
