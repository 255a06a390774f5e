"""Store capabilities: every port method is abstract (no silent defaults), a component that needs a
capability refuses a store without it as the container builds it, and optional capabilities are
simply not used. Stores here are in memory: no I/O."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dependency_injector import providers

from schedule_sdk import (
    InvalidSetting,
    OneShotSpec,
    ScheduleContainer,
    ScheduleService,
    StoreLacksCapability,
    TransactionNotJoinable,
)
from schedule_sdk.adapters.memory import MemoryJobStore
from schedule_sdk.adapters.publishers.blinker import BlinkerEventPublisher
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.core.firing import Firing
from schedule_sdk.core.health import check_health
from schedule_sdk.core.listeners import ListenerRegistry
from schedule_sdk.core.reconciler import Reconciler
from schedule_sdk.core.retention import Purger
from schedule_sdk.domain.jobs import JobQuery, ScheduledJob
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import (
    CAPABILITIES,
    FireHistory,
    JobStore,
    JobTransaction,
    JoinableStore,
    OccurrenceRef,
    OperatorReads,
    Retention,
    WorkerInfo,
    WorkerRegistry,
    provided,
    require,
)
from schedule_sdk.substrates.sql.queue import SQLExecutionQueue
from schedule_sdk.testing import FakeClock

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class BareStore(JobStore):
    """The JobStore port and nothing else (in memory, by delegation)."""

    def __init__(self) -> None:
        self.inner = MemoryJobStore()

    def transaction(self) -> contextlib.AbstractContextManager[JobTransaction]:
        return self.inner.transaction()

    def get(self, job_id: str) -> ScheduledJob | None:
        return self.inner.get(job_id)

    def list_jobs(self, query: JobQuery) -> list[ScheduledJob]:
        return self.inner.list_jobs(query)

    def claim_due(
        self, now: datetime, limit: int, worker_id: str, lease_until: datetime
    ) -> list[ScheduledJob]:
        return self.inner.claim_due(now, limit, worker_id, lease_until)

    def claim_many(
        self, occurrences: Sequence[OccurrenceRef], now: datetime, worker_id: str, lease_until: datetime
    ) -> list[ScheduledJob]:
        return self.inner.claim_many(occurrences, now, worker_id, lease_until)

    def extend_claims(self, worker_id: str, job_ids: Sequence[str], lease_until: datetime) -> None:
        self.inner.extend_claims(worker_id, job_ids, lease_until)

    def release_claims(self, worker_id: str, job_ids: Sequence[str]) -> int:
        return self.inner.release_claims(worker_id, job_ids)

    def release_expired(self, now: datetime, limit: int) -> list[ScheduledJob]:
        return self.inner.release_expired(now, limit)

    def next_due_at(self, now: datetime | None = None) -> datetime | None:
        return self.inner.next_due_at(now)

    def scan_open(self, after_id: str | None, limit: int) -> list[ScheduledJob]:
        return self.inner.scan_open(after_id, limit)

    def watch(
        self,
        on_change: Callable[[datetime | None], None],
        on_slot_freed: Callable[[], None] | None = None,
    ) -> Callable[[], None]:
        return self.inner.watch(on_change)

    def close(self) -> None:
        self.inner.close()


class RegistryStore(BareStore, WorkerRegistry):
    """The JobStore port and a worker registry."""

    def beat(self, worker: WorkerInfo) -> None:
        self.inner.beat(worker)

    def workers(self) -> list[WorkerInfo]:
        return self.inner.workers()

    def remove_worker(self, worker_id: str) -> None:
        self.inner.remove_worker(worker_id)

    def release_dead(
        self, beat_before: datetime, also: Sequence[str], now: datetime, limit: int
    ) -> list[ScheduledJob]:
        return self.inner.release_dead(beat_before, also, now, limit)

    def forget_workers(self, beat_before: datetime) -> int:
        return self.inner.forget_workers(beat_before)

    def store_clock(self) -> datetime | None:
        return self.inner.store_clock()


@pytest.fixture
def container(tmp_path: Path) -> Iterator[ScheduleContainer]:
    container = ScheduleContainer()
    container.config.from_dict({"database_url": f"sqlite:///{tmp_path}/never-opened.db"})
    yield container
    container.shutdown_resources()


def use(container: ScheduleContainer, store: JobStore, **settings: object) -> None:
    container.config.from_dict(settings)
    container.store.override(providers.Object(store))


# -- the ports -----------------------------------------------------------------------------------


@pytest.mark.parametrize("port", CAPABILITIES, ids=lambda port: port.__name__)
def test_every_method_of_a_capability_is_abstract(port: type) -> None:
    public = {name for name in vars(port) if not name.startswith("_")}
    assert public and public == set(port.__abstractmethods__)  # type: ignore[attr-defined]


def test_the_job_store_port_has_no_defaults_but_derivations() -> None:
    concrete = {name for name in vars(JobStore) if not name.startswith("_")} - JobStore.__abstractmethods__
    derived = {
        "outcome_transaction",
        "claim",
        "claim_due_planned",
        "scan_open_occurrences",
        "backlog",
        "concurrency_load",
        "warm",
        "still_claimed",
        "still_claimed_many",
    }
    lookup = {"capability"}  # not a derivation: how a store hands out the capabilities it composes
    hooks = {"quiesce"}  # a lifecycle hook whose default does nothing (no store state to end)
    assert concrete == derived | lookup | hooks


def test_the_sdk_stores_declare_every_capability(tmp_path: Path) -> None:
    for port in CAPABILITIES:  # all but the operator's reads (the dashboard's), SQL aggregates
        assert issubclass(MemoryJobStore, port) is (port is not OperatorReads)
        assert (provided(MemoryJobStore(), port) is not None) is (port is not OperatorReads)
    assert not any(isinstance(BareStore(), port) for port in CAPABILITIES)
    assert not any(provided(BareStore(), port) for port in CAPABILITIES)
    sql = SQLAlchemyJobStore(make_engine(f"sqlite:///{tmp_path / 'capabilities.db'}"))
    try:
        for port in CAPABILITIES:  # composed objects of their own, not the store
            found = provided(sql, port)
            assert isinstance(found, port) and found is not sql
            assert require(sql, port, "this test") is found
    finally:
        sql.close()


def test_a_capability_is_found_through_the_store_or_the_object_itself() -> None:
    memory = MemoryJobStore()
    assert provided(memory, WorkerRegistry) is memory
    assert provided(memory.capability(WorkerRegistry), WorkerRegistry) is memory  # a capability object
    assert provided(object(), WorkerRegistry) is None
    with pytest.raises(StoreLacksCapability):
        require(BareStore(), WorkerRegistry, "this test")


# -- refused as the container builds a component ---------------------------------------------------


def test_a_worker_refuses_a_store_without_a_worker_registry(container: ScheduleContainer) -> None:
    use(container, BareStore())
    with pytest.raises(StoreLacksCapability) as caught:
        container.worker()
    error = caught.value
    assert isinstance(error, InvalidSetting) and error.code == "SCHEDULE_STORE_LACKS_CAPABILITY"
    assert (error.store, error.capability) == ("BareStore", "WorkerRegistry")
    assert "dead-worker detection" in error.needed_by and "BareStore" in str(error)


def test_retention_refuses_a_store_without_retention(container: ScheduleContainer) -> None:
    use(container, RegistryStore(), retention="30d")
    with pytest.raises(StoreLacksCapability) as caught:
        container.worker()
    assert caught.value.capability == "Retention"
    with pytest.raises(StoreLacksCapability):
        container.purger()


def test_without_retention_period_a_worker_needs_no_retention(container: ScheduleContainer) -> None:
    use(container, RegistryStore())
    worker = container.worker()
    assert worker._purger is None and not worker.running


def test_the_sdk_stores_pass_every_check(container: ScheduleContainer) -> None:
    use(container, MemoryJobStore(), retention="30d")
    assert container.worker()._purger is container.purger()


def test_components_built_directly_refuse_too() -> None:
    store, clock = BareStore(), FakeClock(NOW)
    with pytest.raises(StoreLacksCapability, match="WorkerRegistry"):
        check_health(store=store, clock=clock, dead_after=10)
    with pytest.raises(StoreLacksCapability, match="Retention"):
        Purger(store=store, clock=clock, retention=timedelta(days=1))
    reconciler = Reconciler(store=store, queue=SQLExecutionQueue(), clock=clock)
    with pytest.raises(StoreLacksCapability, match="WorkerRegistry"):
        reconciler.release_dead(NOW)


def test_a_purger_without_a_fire_history_purges_jobs_only() -> None:
    class JobsOnly(BareStore, Retention):
        one_writer = False

        def purge_finished(self, before: datetime, limit: int, *, wait: bool = False) -> int | None:
            return self.inner.purge_finished(before, limit, wait=wait)

    purger = Purger(store=JobsOnly(), clock=FakeClock(NOW), retention=timedelta(days=1))
    assert purger.purge(timedelta(days=1)) == 0
    assert purger.purge_history(timedelta(days=1)) == 0


# -- optional capabilities: used when present ---------------------------------------------------


def test_without_joinable_store_connection_is_refused_and_nothing_is_written() -> None:
    store = BareStore()
    service = ScheduleService(store=store, queue=SQLExecutionQueue(), clock=FakeClock(NOW))
    spec = OneShotSpec(topic="t.joined", run_at=NOW + timedelta(hours=1), timezone="UTC")
    with pytest.raises(TransactionNotJoinable, match="BareStore"):
        service.schedule_at(spec, connection=object())
    assert store.scan_open(None, 10) == []
    assert not isinstance(store, JoinableStore)


def test_without_fire_history_fires_are_recorded_without_history() -> None:
    store, clock = BareStore(), FakeClock(NOW)
    queue = SQLExecutionQueue()
    service = ScheduleService(store=store, queue=queue, clock=clock)
    job = service.schedule_at(OneShotSpec(topic="t.plain", run_at=NOW + timedelta(seconds=1), timezone="UTC"))
    clock.advance(timedelta(seconds=2))
    firing = Firing(
        store=store, queue=queue, publisher=BlinkerEventPublisher(ListenerRegistry()), clock=clock
    )
    [claimed] = store.claim_due(clock.now(), 10, "w1", clock.now() + timedelta(seconds=30))
    firing.fire(claimed)
    done = store.get(job.id)
    assert done is not None and done.status is JobStatus.COMPLETED
    assert service.history(job.id) == [] and not isinstance(store, FireHistory)
    assert store.inner.history(job.id, 10) == []  # nothing was written around the port
