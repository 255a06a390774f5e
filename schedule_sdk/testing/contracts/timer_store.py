"""The timer store contract (:class:`~schedule_sdk.ports.TimerStore`), as tests any timer
store must pass.

::

    from schedule_sdk.testing.contracts.timer_store import TimerStoreContract

    class TestMyTimerStore(TimerStoreContract):
        def open_stores(self):
            jobs = MyJobStore(...)                 # fresh and empty, once per test
            return jobs, MyTimerStore(jobs)        # the timer store writes in jobs' transactions

``close_stores`` (after each test) closes the job store. Needs pytest only; no fixtures.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from schedule_sdk.domain.jobs import JobMetadata, ScheduledJob
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.timers import TimerEntry, TimerState
from schedule_sdk.ports import JobStore, TimerStore
from schedule_sdk.testing.contracts.rows import insert, job

#: A fixed instant with whole milliseconds (timer times are kept to the millisecond).
T0 = datetime(2030, 3, 30, 12, 0, 0, 250_000, tzinfo=UTC)
TOPIC = "contract.timer"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def entry(tenant: str = "t1", call: str = "sc1", due: float = 0.0, **changes: object) -> TimerEntry:
    values: dict[str, object] = {
        "tenant_id": tenant,
        "service_call_id": call,
        "correlation_id": f"corr-{call}",
        "due_at": at(due),
        "registered_at": at(-60),
    }
    values.update(changes)
    return TimerEntry(**values)  # type: ignore[arg-type]


class TimerStoreContract:
    _stores: tuple[JobStore, TimerStore] | None = None

    def open_stores(self) -> tuple[JobStore, TimerStore]:
        raise NotImplementedError("a contract subclass returns (job store, timer store) from open_stores()")

    def close_stores(self) -> None:
        self.jobs.close()

    @property
    def jobs(self) -> JobStore:
        return self._open()[0]

    @property
    def timers(self) -> TimerStore:
        return self._open()[1]

    def _open(self) -> tuple[JobStore, TimerStore]:
        if self._stores is None:
            self._stores = self.open_stores()
        return self._stores

    def setup_method(self, method: object) -> None:
        self._stores = None

    def teardown_method(self, method: object) -> None:
        if self._stores is not None:
            self.close_stores()
        self._stores = None

    def insert(self, *entries: TimerEntry) -> set[tuple[str, str]]:
        with self.jobs.transaction() as tx:
            return self.timers.insert_many(tx, entries)

    # -- the tests ---------------------------------------------------------------------------

    def test_insert_then_get_returns_the_entry_with_aware_utc_times(self) -> None:
        written = entry(due_at=at(5).astimezone(timezone(timedelta(hours=2))))
        assert self.insert(written) == {("t1", "sc1")}
        read = self.timers.get("t1", "sc1")
        assert read == entry(due=5)
        assert read is not None and read.due_at.utcoffset() == timedelta(0)
        assert read.state is TimerState.SCHEDULED and read.reached_at is None

    def test_a_second_insert_for_the_same_key_is_not_inserted(self) -> None:
        self.insert(entry(due=1))
        assert self.insert(entry(due=9), entry(call="sc2")) == {("t1", "sc2")}
        assert self.timers.get("t1", "sc1") == entry(due=1)

    def test_tenants_are_separate(self) -> None:
        assert self.insert(entry(tenant="a"), entry(tenant="b", due=7)) == {("a", "sc1"), ("b", "sc1")}
        assert self.timers.get("a", "sc1") == entry(tenant="a")
        assert self.timers.get("b", "sc1") == entry(tenant="b", due=7)
        assert self.timers.get("c", "sc1") is None

    def test_writes_roll_back_with_the_job_store_transaction(self) -> None:
        with pytest.raises(RuntimeError, match="abort"), self.jobs.transaction() as tx:
            self.timers.insert_many(tx, [entry()])
            assert self.timers.get("t1", "sc1", tx) == entry()
            raise RuntimeError("abort")
        assert self.timers.get("t1", "sc1") is None

    def test_get_many_returns_the_existing_keys_only(self) -> None:
        self.insert(entry(), entry(call="sc2"), entry(tenant="t2", call="sc3"))
        with self.jobs.transaction() as tx:
            found = self.timers.get_many(tx, [("t1", "sc1"), ("t1", "sc3"), ("t2", "sc3"), ("t9", "x")])
            assert self.timers.get_many(tx, []) == {}
        assert found == {("t1", "sc1"): entry(), ("t2", "sc3"): entry(tenant="t2", call="sc3")}

    def test_move_changes_the_due_time_of_a_scheduled_timer_only(self) -> None:
        self.insert(entry(), entry(call="done"))
        with self.jobs.transaction() as tx:
            assert self.timers.mark_reached(tx, entry(call="done"), at(1))
        with self.jobs.transaction() as tx:
            assert self.timers.move(tx, "t1", "sc1", at(30))
            assert not self.timers.move(tx, "t1", "done", at(30))
            assert not self.timers.move(tx, "t1", "missing", at(30))
            assert not self.timers.move(tx, "t2", "sc1", at(30))
        assert self.timers.get("t1", "sc1") == entry(due=30)
        assert self.timers.get("t1", "done") == entry(call="done", state=TimerState.REACHED, reached_at=at(1))

    def test_mark_reached_only_while_still_due_at_the_entrys_time(self) -> None:
        self.insert(entry(), entry(call="moved"))
        with self.jobs.transaction() as tx:
            assert self.timers.move(tx, "t1", "moved", at(60))
        with self.jobs.transaction() as tx:
            assert self.timers.mark_reached(tx, entry(), at(2))
            assert not self.timers.mark_reached(tx, entry(call="moved"), at(2))  # a move won
        with self.jobs.transaction() as tx:
            assert not self.timers.mark_reached(tx, entry(), at(3))  # reached already
        reached = self.timers.get("t1", "sc1")
        assert reached is not None and reached.reached and reached.reached_at == at(2)
        assert self.timers.get("t1", "moved") == entry(call="moved", due=60)

    def test_find_due_is_the_tenants_scheduled_due_timers_earliest_first(self) -> None:
        self.insert(
            entry(call="late", due=-1),
            entry(call="early", due=-10),
            entry(call="now", due=0),
            entry(call="future", due=0.001),
            entry(call="reached", due=-5),
            entry(tenant="t2", call="other", due=-20),
        )
        with self.jobs.transaction() as tx:
            self.timers.mark_reached(tx, entry(call="reached", due=-5), at(0))
        due = self.timers.find_due("t1", at(0))
        assert [e.service_call_id for e in due] == ["early", "late", "now"]
        assert [e.service_call_id for e in self.timers.find_due("t1", at(0), limit=2)] == ["early", "late"]

    def test_by_correlation_is_tenant_scoped_earliest_due_first(self) -> None:
        self.insert(
            entry(call="b", due=5, correlation_id="c"),
            entry(call="a", due=1, correlation_id="c"),
            entry(call="x", due=0, correlation_id="other"),
            entry(tenant="t2", call="z", due=0, correlation_id="c"),
        )
        assert [e.service_call_id for e in self.timers.by_correlation("t1", "c")] == ["a", "b"]
        assert self.timers.by_correlation("t1", "none") == []

    def test_unarmed_lists_scheduled_timers_with_no_open_job_of_the_topic(self) -> None:
        self.insert(
            entry(call="armed", due=1),
            entry(call="bare", due=2),
            entry(call="finished-job", due=3),
            entry(call="other-topic", due=4),
            entry(tenant="t2", call="armed", due=5),  # same call id, other tenant: not armed
        )

        def job_for(call: str, status: JobStatus = JobStatus.PENDING, topic: str = TOPIC) -> ScheduledJob:
            return job(topic=topic, status=status, metadata=JobMetadata(tenant_id="t1", owner_id=call))

        insert(
            self.jobs,
            job_for("armed"),
            job_for("finished-job", JobStatus.COMPLETED),
            job_for("other-topic", topic="else"),
        )
        unarmed = self.timers.unarmed(TOPIC, 100)
        assert [(e.tenant_id, e.service_call_id) for e in unarmed] == [
            ("t1", "bare"),
            ("t1", "finished-job"),
            ("t1", "other-topic"),
            ("t2", "armed"),
        ]
        assert len(self.timers.unarmed(TOPIC, 2)) == 2
