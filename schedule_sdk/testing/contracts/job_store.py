"""The :class:`~schedule_sdk.ports.JobStore` contract: every sentence of the port's docstrings,
as tests any store must pass.

Subclass a contract class in your test module (a name starting with ``Test``) and say how to open
your store; pytest collects every test of the suite there::

    from schedule_sdk.testing.contracts.job_store import JobStoreContract

    class TestMyJobStore(JobStoreContract):
        def open_store(self):
            return MyJobStore(...)          # a fresh, empty store, once per test

        def reopen(self):                   # optional: another process's view of the same data
            return MyJobStore(...)

``self.job_store`` is the store of the current test (opened on first use); ``close_stores``
(run in ``teardown_method``) closes it; override it to close what ``reopen`` opened too. The suite
needs pytest and nothing else: no fixtures, no conftest.

Each capability a store declares (see :mod:`schedule_sdk.ports`) has its own suite; a store runs
those of the capabilities it inherits: :class:`WorkerRegistryContract` (``WorkerRegistry``),
:class:`FireHistoryContract` (``FireHistory``), :class:`JobStoreRetentionContract`
(``Retention``), and :class:`~schedule_sdk.testing.contracts.joined.JoinedTransactionContract`
(``JoinableStore``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk.domain.errors import ClientRequestIdInUse
from schedule_sdk.domain.history import FireOutcome
from schedule_sdk.domain.jobs import (
    IntervalRepeat,
    JobMetadata,
    JobQuery,
    MisfirePolicy,
    RetryPolicy,
    ScheduledJob,
)
from schedule_sdk.domain.status import OPEN_STATUSES, JobStatus
from schedule_sdk.ports import (
    DueScan,
    Guard,
    JobStore,
    Occurrence,
    OpenOccurrence,
    TopicBacklog,
    provided,
)

# The capability suites and the shared helpers live in modules of their own; they are
# importable from here as they always were (``__all__``).
from schedule_sdk.testing.contracts.fire_history import PLUS_2, FireHistoryContract
from schedule_sdk.testing.contracts.retention import JobStoreRetentionContract
from schedule_sdk.testing.contracts.rows import FIRED_JOB_ID, NOW, at, fire, ids, insert, job, record
from schedule_sdk.testing.contracts.store import (
    ACTIVE,
    CLOSED,
    FINISHED,
    OPEN,
    PENDING,
    PLUS_5,
    TIME_FIELDS,
    StoreContract,
    assert_utc,
    expected,
    full_job,
    held,
    held_due,
    moved_on,
    worker,
)
from schedule_sdk.testing.contracts.worker_registry import WorkerRegistryContract

__all__ = [
    "ACTIVE",
    "CLOSED",
    "FINISHED",
    "FIRED_JOB_ID",
    "NOW",
    "OPEN",
    "PENDING",
    "PLUS_2",
    "PLUS_5",
    "TIME_FIELDS",
    "FireHistoryContract",
    "JobStoreContract",
    "JobStoreRetentionContract",
    "StoreContract",
    "WorkerRegistryContract",
    "assert_utc",
    "at",
    "expected",
    "fire",
    "full_job",
    "held",
    "held_due",
    "ids",
    "insert",
    "job",
    "moved_on",
    "record",
    "worker",
]


class JobStoreContract(StoreContract):
    """The :class:`~schedule_sdk.ports.JobStore` port: transactions, reads, guarded updates,
    listing, claims, leases, scans, the backlog and watch."""

    def test_insert_then_get_returns_every_field_with_times_as_aware_utc(self) -> None:
        written = full_job()
        insert(self.job_store, written)
        read = self.job_store.get(written.id)
        assert read == written
        assert read is not None
        assert_utc(read)
        assert read.run_at.tzinfo is not None and read.run_at == NOW

    def test_roundtrip_of_a_minimal_job_and_an_interval_job(self) -> None:
        minimal = job()
        interval = job(repeat=IntervalRepeat(every_ms=90_000), payload={})
        insert(self.job_store, minimal, interval)
        assert self.job_store.get(minimal.id) == minimal
        assert self.job_store.get(interval.id) == interval

    def test_a_run_names_its_job_in_every_read_and_keeps_it_through_claims_and_updates(self) -> None:
        parent = job(
            repeat=IntervalRepeat(every_ms=60_000),
            overlap="allow",
            status=ACTIVE,
            claimed_by="w1",
            claimed_until=at(30),
            occurrence=4,
            run_at=at(-2),
            metadata=JobMetadata(owner_id="o", client_request_id="r-allow"),
            payload={"k": [1, 2]},
        )
        run = parent.run_for("01900000-0000-7000-8000-0000000000a1", NOW)
        insert(self.job_store, parent, run)
        assert self.job_store.get(run.id) == run
        assert run.run_of == parent.id and run.metadata.client_request_id is None
        assert (run.occurrence, run.repeat, run.status) == (4, None, PENDING)
        listed = self.job_store.list_jobs(JobQuery(owner_id="o", limit=10))
        assert {j.id: j.run_of for j in listed} == {parent.id: None, run.id: parent.id}
        (claimed,) = self.job_store.claim_due(NOW, 10, "w2", at(30))
        assert claimed == run.evolve(status=ACTIVE, claimed_by="w2", claimed_until=at(30), updated_at=NOW)
        with self.job_store.transaction() as tx:
            guard = Guard(frozenset({ACTIVE}), claimed_by="w2", occurrence=4)
            assert tx.update(claimed.evolve(status=JobStatus.COMPLETED, run_of=None), guard)
        done = self.job_store.get(run.id)
        assert done is not None and done.status is JobStatus.COMPLETED and done.run_of == parent.id

    def test_get_of_an_unknown_id_is_none(self) -> None:
        assert self.job_store.get("01900000-0000-7000-8000-00000000dead") is None
        with self.job_store.transaction() as tx:
            assert tx.get("01900000-0000-7000-8000-00000000dead") is None

    def test_a_transaction_reads_its_own_writes(self) -> None:
        j = job()
        with self.job_store.transaction() as tx:
            tx.insert(j)
            assert tx.get(j.id) == j
            assert tx.get(j.id, for_update=True) == j

    def test_nothing_is_visible_to_others_until_commit(self) -> None:
        j = job()
        seen: list[ScheduledJob | None] = []
        with self.job_store.transaction() as tx:
            tx.insert(j)
            reader = threading.Thread(target=lambda: seen.append(self.job_store.get(j.id)))
            reader.start()
            reader.join(timeout=10)
            assert not reader.is_alive(), "a reader waited for a writer"
        assert seen == [None]
        assert self.job_store.get(j.id) == j

    def test_leaving_the_block_with_an_exception_rolls_everything_back(self) -> None:
        existing = insert(self.job_store, job())[0]
        new = job()
        with pytest.raises(RuntimeError, match="abort"), self.job_store.transaction() as tx:
            tx.insert(new)
            assert tx.update(existing.evolve(status=JobStatus.CANCELLED), Guard(OPEN_STATUSES))
            raise RuntimeError("abort")
        assert self.job_store.get(new.id) is None
        assert self.job_store.get(existing.id) == existing
        insert(self.job_store, new)  # the id is free again: nothing of the failed transaction remains
        assert self.job_store.get(new.id) == new

    def test_an_outcome_transaction_commits_and_rolls_back_as_any_other(self) -> None:
        existing = insert(self.job_store, job())[0]
        kept, dropped = job(), job()
        with self.job_store.outcome_transaction() as tx:
            tx.insert(kept)
            assert tx.update(existing.evolve(status=JobStatus.CANCELLED), Guard(OPEN_STATUSES))
        with pytest.raises(RuntimeError, match="abort"), self.job_store.outcome_transaction() as tx:
            tx.insert(dropped)
            raise RuntimeError("abort")
        assert self.job_store.get(kept.id) == kept
        cancelled = self.job_store.get(existing.id)
        assert cancelled is not None and cancelled.status is JobStatus.CANCELLED
        assert self.job_store.get(dropped.id) is None

    def test_a_used_client_request_id_is_refused_and_nothing_is_written(self) -> None:
        first = job(metadata=JobMetadata(client_request_id="req-1"), status=JobStatus.CANCELLED)
        insert(self.job_store, first)
        other, duplicate = job(), job(metadata=JobMetadata(client_request_id="req-1", owner_id="x"))
        with pytest.raises(ClientRequestIdInUse) as caught, self.job_store.transaction() as tx:
            tx.insert(other)
            tx.insert(duplicate)
        assert caught.value.code == "SCHEDULE_CLIENT_REQUEST_ID_IN_USE"
        assert caught.value.client_request_id == "req-1"
        assert self.job_store.get(other.id) is None and self.job_store.get(duplicate.id) is None
        assert self.job_store.get(first.id) == first

    def test_a_client_request_id_is_unique_within_one_transaction(self) -> None:
        a, b = (job(metadata=JobMetadata(client_request_id="same")) for _ in range(2))
        with pytest.raises(ClientRequestIdInUse), self.job_store.transaction() as tx:
            tx.insert(a)
            tx.insert(b)
        assert self.job_store.get(a.id) is None

    def test_insert_many_writes_every_row_in_one_transaction(self) -> None:
        jobs = [full_job(), job(), job(repeat=IntervalRepeat(every_ms=1000), payload={"i": 2})]
        with self.job_store.transaction() as tx:
            tx.insert_many(jobs)
            assert tx.get(jobs[1].id) == jobs[1]
        assert [self.job_store.get(j.id) for j in jobs] == jobs
        with self.job_store.transaction() as tx:
            tx.insert_many([])

    def test_insert_many_rolls_back_with_its_transaction(self) -> None:
        jobs = [job(), job()]
        with pytest.raises(RuntimeError, match="abort"), self.job_store.transaction() as tx:
            tx.insert_many(jobs)
            raise RuntimeError("abort")
        assert [self.job_store.get(j.id) for j in jobs] == [None, None]

    def test_insert_many_refuses_a_used_client_request_id_naming_it(self) -> None:
        first = insert(self.job_store, job(metadata=JobMetadata(client_request_id="req-1")))[0]
        batch = [job(metadata=JobMetadata(client_request_id=f"new-{i}")) for i in range(3)]
        batch.insert(2, job(metadata=JobMetadata(client_request_id="req-1")))
        with pytest.raises(ClientRequestIdInUse) as caught, self.job_store.transaction() as tx:
            tx.insert_many(batch)
        assert caught.value.client_request_id == "req-1"
        assert all(self.job_store.get(j.id) is None for j in batch)
        assert self.job_store.get(first.id) == first

    def test_insert_many_refuses_a_client_request_id_used_twice_in_the_batch(self) -> None:
        batch = [job(metadata=JobMetadata(client_request_id=name)) for name in ("a", "b", "a")]
        with pytest.raises(ClientRequestIdInUse) as caught, self.job_store.transaction() as tx:
            tx.insert_many(batch)
        assert caught.value.client_request_id == "a"
        assert all(self.job_store.get(j.id) is None for j in batch)

    def test_a_client_request_id_is_unique_per_tenant(self) -> None:
        def with_id(tenant: str | None) -> ScheduledJob:
            return job(metadata=JobMetadata(tenant_id=tenant, client_request_id="order-7"))

        # one id, used once by each of two tenants and once without a tenant: no clash
        first = insert(self.job_store, with_id("t1"), with_id("t2"), with_id(None))
        with self.job_store.transaction() as tx:  # the bulk path keys it per tenant too
            tx.insert_many([with_id("t3"), with_id("t4")])
        for tenant in ("t1", None):  # the same tenant again (or no tenant again): refused
            again = with_id(tenant)
            with pytest.raises(ClientRequestIdInUse) as caught, self.job_store.transaction() as tx:
                tx.insert(again)
            assert caught.value.client_request_id == "order-7"
            assert self.job_store.get(again.id) is None
        batch = [job(metadata=JobMetadata(tenant_id="t9", client_request_id="x")), with_id("t2")]
        with pytest.raises(ClientRequestIdInUse) as caught, self.job_store.transaction() as tx:
            tx.insert_many(batch)
        assert caught.value.client_request_id == "order-7"
        assert all(self.job_store.get(j.id) is None for j in batch)
        assert all(self.job_store.get(j.id) == j for j in first)

    def test_jobs_without_client_request_id_never_clash(self) -> None:
        jobs = insert(self.job_store, *(job() for _ in range(3)))
        assert all(self.job_store.get(j.id) == j for j in jobs)

    @pytest.mark.parametrize("round_", range(5))
    def test_two_racing_transactions_with_one_client_request_id_exactly_one_wins(self, round_: int) -> None:
        stores = [self.job_store, self.reopen()]
        candidates = [job(metadata=JobMetadata(client_request_id=f"race-{round_}")) for _ in stores]
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def attempt(store: JobStore, j: ScheduledJob) -> None:
            barrier.wait()
            try:
                insert(store, j)
                outcomes.append("won")
            except ClientRequestIdInUse:
                outcomes.append("lost")

        threads = [
            threading.Thread(target=attempt, args=pair) for pair in zip(stores, candidates, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert sorted(outcomes) == ["lost", "won"]
        assert sum(self.job_store.get(j.id) is not None for j in candidates) == 1

    def test_update_writes_every_mutable_field_when_the_guard_holds(self) -> None:
        j = insert(self.job_store, job(status=JobStatus.ACTIVE, claimed_by="w1", claimed_until=at(30)))[0]
        new = moved_on(j)
        with self.job_store.transaction() as tx:
            assert tx.update(new, Guard(frozenset({JobStatus.ACTIVE}), claimed_by="w1", occurrence=1))
        assert self.job_store.get(j.id) == new

    def test_update_leaves_immutable_fields_alone(self) -> None:
        j = insert(self.job_store, job(payload={"a": 1}, metadata=JobMetadata(owner_id="o")))[0]
        tampered = j.evolve(
            topic="other",
            payload={"b": 2},
            metadata=JobMetadata(owner_id="p"),
            timezone="Asia/Tokyo",
            created_at=at(99),
            retry=RetryPolicy(attempts=3),
            rescheduled_from=j.id,
            misfire=MisfirePolicy(mode="skip"),
            run_of=j.id,
            status=JobStatus.CANCELLED,
        )
        with self.job_store.transaction() as tx:
            assert tx.update(tampered, Guard(OPEN_STATUSES))
        assert self.job_store.get(j.id) == j.evolve(status=JobStatus.CANCELLED)

    @pytest.mark.parametrize(
        "guard",
        [
            pytest.param(Guard(frozenset({JobStatus.PENDING})), id="status"),
            pytest.param(Guard(frozenset({JobStatus.ACTIVE}), claimed_by="w2", occurrence=1), id="worker"),
            pytest.param(
                Guard(frozenset({JobStatus.ACTIVE}), claimed_by="w1", occurrence=2), id="occurrence"
            ),
        ],
    )
    def test_update_returns_false_and_writes_nothing_when_the_guard_fails(self, guard: Guard) -> None:
        j = insert(self.job_store, job(status=JobStatus.ACTIVE, claimed_by="w1", claimed_until=at(30)))[0]
        with self.job_store.transaction() as tx:
            assert tx.update(moved_on(j), guard) is False
        assert self.job_store.get(j.id) == j

    def test_update_of_a_missing_row_returns_false(self) -> None:
        with self.job_store.transaction() as tx:
            assert tx.update(job(), Guard(OPEN_STATUSES)) is False

    def test_update_many_writes_the_rows_whose_guard_holds_and_leaves_the_rest(self) -> None:
        a, b, c, d = insert(
            self.job_store,
            job(status=JobStatus.ACTIVE, claimed_by="w1", claimed_until=at(30)),
            job(status=JobStatus.ACTIVE, claimed_by="w1", claimed_until=at(30)),
            job(status=JobStatus.ACTIVE, claimed_by="w2", claimed_until=at(30)),
            job(),
        )
        held = frozenset({JobStatus.ACTIVE})
        with self.job_store.transaction() as tx:
            tx.update_many(
                [
                    (moved_on(a), Guard(held, claimed_by="w1", occurrence=1)),
                    (moved_on(b), Guard(held, claimed_by="w1", occurrence=1)),
                    (moved_on(c), Guard(held, claimed_by="w1", occurrence=1)),  # claimed by w2
                    (d.evolve(status=JobStatus.CANCELLED), Guard(frozenset({JobStatus.PENDING}))),
                ]
            )
            tx.update_many([])
        assert self.job_store.get(a.id) == moved_on(a)
        assert self.job_store.get(b.id) == moved_on(b)
        assert self.job_store.get(c.id) == c
        assert self.job_store.get(d.id) == d.evolve(status=JobStatus.CANCELLED)

    def _listed(self) -> list[ScheduledJob]:
        """12 jobs in creation order over 2 owners, 2 tenants, 2 topics, 3 statuses, 3 last outcomes."""
        statuses = [JobStatus.PENDING, JobStatus.COMPLETED, JobStatus.CANCELLED]
        outcomes = [None, FireOutcome.UNHEARD, FireOutcome.SUCCEEDED, FireOutcome.FAILED]
        jobs = [
            job(
                topic=f"topic-{n % 2}",
                status=statuses[n % 3],
                metadata=JobMetadata(owner_id=f"o{n % 2}", tenant_id=f"t{n // 6}"),
                last_outcome=outcomes[n % 4],
            )
            for n in range(12)
        ]
        return insert(self.job_store, *reversed(jobs))  # insertion order must not matter

    def test_list_jobs_is_in_ascending_id_order_up_to_limit(self) -> None:
        listed = self._listed()
        assert ids(self.job_store.list_jobs(JobQuery(limit=100))) == sorted(ids(listed))
        assert ids(self.job_store.list_jobs(JobQuery(limit=5))) == sorted(ids(listed))[:5]

    @pytest.mark.parametrize(
        ("query", "keep"),
        [
            (JobQuery(owner_id="o1"), lambda j: j.metadata.owner_id == "o1"),
            (JobQuery(tenant_id="t0"), lambda j: j.metadata.tenant_id == "t0"),
            (JobQuery(topic="topic-0"), lambda j: j.topic == "topic-0"),
            (JobQuery(statuses=frozenset({JobStatus.PENDING})), lambda j: j.status == "pending"),
            (
                JobQuery(
                    statuses=frozenset({JobStatus.PENDING, JobStatus.CANCELLED}),
                    tenant_id="t1",
                    owner_id="o0",
                ),
                lambda j: (
                    j.status != "completed" and j.metadata.tenant_id == "t1" and j.metadata.owner_id == "o0"
                ),
            ),
            (JobQuery(owner_id="nobody"), lambda j: False),
            (JobQuery(outcomes=frozenset({FireOutcome.UNHEARD})), lambda j: j.last_outcome == "unheard"),
            (
                JobQuery(
                    outcomes=frozenset({FireOutcome.UNHEARD, FireOutcome.FAILED}),
                    statuses=frozenset({JobStatus.COMPLETED}),
                ),
                lambda j: j.last_outcome in ("unheard", "failed") and j.status == "completed",
            ),
        ],
    )
    def test_list_jobs_applies_every_given_filter(
        self, query: JobQuery, keep: Callable[[ScheduledJob], bool]
    ) -> None:
        listed = self._listed()
        assert ids(self.job_store.list_jobs(query)) == expected(listed, keep)

    def test_list_jobs_pages_by_keyset_after_id(self) -> None:
        listed = self._listed()
        pages: list[list[str]] = []
        after = None
        while page := self.job_store.list_jobs(JobQuery(owner_id="o0", limit=2, after_id=after)):
            pages.append(ids(page))
            after = page[-1].id
        assert [i for p in pages for i in p] == expected(listed, lambda j: j.metadata.owner_id == "o0")
        assert all(len(p) == 2 for p in pages)
        # a row inserted after paging began, with a higher id, shows up on a later page
        late = insert(self.job_store, job(metadata=JobMetadata(owner_id="o0")))[0]
        assert ids(self.job_store.list_jobs(JobQuery(owner_id="o0", after_id=after))) == [late.id]

    def test_every_read_returns_aware_utc(self) -> None:
        self._listed()
        for j in self.job_store.list_jobs(JobQuery(limit=100)):
            assert_utc(j)
            assert j.run_at.tzinfo is not None
            assert j.run_at.astimezone(UTC) == NOW

    def test_claim_due_claims_due_pending_rows_earliest_first_up_to_limit(self) -> None:
        later, now_, earliest = insert(
            self.job_store, job(run_at=at(-1)), job(run_at=NOW), job(run_at=at(-60))
        )
        claimed = self.job_store.claim_due(NOW, 2, "w1", at(30))
        assert ids(claimed) == [earliest.id, later.id]
        assert ids(self.job_store.claim_due(NOW, 10, "w1", at(30))) == [now_.id]  # run_at == now is due
        assert self.job_store.claim_due(NOW, 10, "w1", at(30)) == []

    def test_claim_due_moves_rows_to_active_and_returns_them_as_claimed(self) -> None:
        j = insert(self.job_store, job(run_at=at(-5), occurrence=3, attempt=2))[0]
        (claimed,) = self.job_store.claim_due(NOW, 10, "worker-1", at(30))
        assert claimed == j.evolve(status=ACTIVE, claimed_by="worker-1", claimed_until=at(30), updated_at=NOW)
        assert self.job_store.get(j.id) == claimed

    def test_claim_due_never_claims_rows_that_are_not_due_or_not_pending(self) -> None:
        insert(
            self.job_store,
            job(run_at=at(0.000001)),
            held("w0", run_at=at(-10)),
            *(job(status=s, run_at=at(-10)) for s in CLOSED),
        )
        assert self.job_store.claim_due(NOW, 100, "w1", at(30)) == []

    @pytest.mark.parametrize("round_", range(4))
    def test_concurrent_claimers_never_claim_a_row_twice(self, round_: int) -> None:
        jobs = insert(self.job_store, *(job(run_at=at(-(n % 17))) for n in range(120)))
        stores = [
            self.job_store,
            self.job_store,
            self.reopen(),
            self.reopen(),
        ]  # 2 threads per store, 2 stores (connections)
        barrier = threading.Barrier(len(stores))
        claims: Counter[tuple[str, str | None]] = Counter()
        lock = threading.Lock()
        errors: list[BaseException] = []

        def claimer(store: JobStore, worker: str) -> None:
            try:
                barrier.wait()
                while batch := store.claim_due(NOW, 7, worker, at(30)):
                    with lock:
                        claims.update((j.id, j.claimed_by) for j in batch)
            except BaseException as error:  # surfaced below
                errors.append(error)

        threads = [threading.Thread(target=claimer, args=(s, f"w{n}")) for n, s in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors
        claimed_ids = Counter(job_id for job_id, _ in claims)
        assert sorted(claimed_ids) == sorted(ids(jobs))
        assert max(claimed_ids.values()) == 1, "a row was claimed twice"
        for job_id, holder in claims:
            row = self.job_store.get(job_id)
            assert row is not None and row.status is ACTIVE and row.claimed_by == holder

    def test_claim_takes_a_due_pending_row_at_its_occurrence_and_attempt(self) -> None:
        j = insert(self.job_store, job(run_at=at(-1), occurrence=2, attempt=3))[0]
        claimed = self.job_store.claim(j.id, 2, 3, NOW, "w1", at(30))
        assert claimed == j.evolve(status=ACTIVE, claimed_by="w1", claimed_until=at(30), updated_at=NOW)
        assert self.job_store.get(j.id) == claimed

    @pytest.mark.parametrize(
        ("occurrence", "attempt", "now"),
        [(2, 2, NOW), (1, 3, NOW), (1, 1, NOW), (3, 1, NOW), (2, 3, at(-2))],
        ids=["attempt", "occurrence", "both", "later-occurrence", "not-due"],
    )
    def test_claim_returns_none_for_another_occurrence_or_attempt_or_before_due(
        self, occurrence: int, attempt: int, now: datetime
    ) -> None:
        j = insert(self.job_store, job(run_at=at(-1), occurrence=2, attempt=3))[0]
        assert self.job_store.claim(j.id, occurrence, attempt, now, "w1", at(30)) is None
        assert self.job_store.get(j.id) == j

    @pytest.mark.parametrize("status", [ACTIVE, *CLOSED])
    def test_claim_returns_none_unless_the_row_is_pending(self, status: JobStatus) -> None:
        j = insert(self.job_store, job(run_at=at(-1), status=status))[0]
        assert self.job_store.claim(j.id, 1, 1, NOW, "w1", at(30)) is None
        assert self.job_store.get(j.id) == j

    def test_claim_of_an_unknown_job_is_none_and_a_second_claim_loses(self) -> None:
        assert self.job_store.claim("01900000-0000-7000-8000-00000000dead", 1, 1, NOW, "w1", at(30)) is None
        j = insert(self.job_store, job())[0]
        assert self.job_store.claim(j.id, 1, 1, NOW, "w1", at(30)) is not None
        assert self.job_store.claim(j.id, 1, 1, NOW, "w2", at(30)) is None
        assert self.job_store.get(j.id).claimed_by == "w1"  # type: ignore[union-attr]

    def test_claim_many_claims_exactly_the_matching_due_pending_occurrences(self) -> None:
        due, other_attempt, not_due, done, also_due = insert(
            self.job_store,
            job(run_at=at(-3)),
            job(run_at=at(-2), attempt=2),
            job(run_at=at(5)),
            job(run_at=at(-1), status=JobStatus.COMPLETED),
            job(run_at=at(-1), occurrence=4),
        )
        asked = [
            (due.id, 1, 1),
            (other_attempt.id, 1, 1),  # the row is at attempt 2
            (not_due.id, 1, 1),
            (done.id, 1, 1),
            (also_due.id, 4, 1),
            (due.id, 1, 1),  # asked twice: claimed once
            ("01900000-0000-7000-8000-00000000dead", 1, 1),
        ]
        claimed = self.job_store.claim_many(asked, NOW, "w1", at(30))
        assert sorted(j.id for j in claimed) == sorted([due.id, also_due.id])
        assert all(j.status is ACTIVE and j.claimed_by == "w1" for j in claimed)
        assert (
            self.job_store.get(other_attempt.id) == other_attempt
            and self.job_store.get(not_due.id) == not_due
        )
        assert self.job_store.claim_many(asked, NOW, "w2", at(30)) == []
        assert self.job_store.claim_many([], NOW, "w2", at(30)) == []

    def test_racing_claims_of_one_occurrence_have_exactly_one_winner(self) -> None:
        jobs = insert(self.job_store, *(job() for _ in range(20)))
        stores = [self.job_store, self.reopen()]
        wins: list[str] = []
        barrier = threading.Barrier(2)

        def claimer(store: JobStore, worker: str) -> None:
            barrier.wait()
            wins.extend(j.id for j in jobs if store.claim(j.id, 1, 1, NOW, worker, at(30)) is not None)

        threads = [threading.Thread(target=claimer, args=(s, f"w{n}")) for n, s in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(wins) == sorted(ids(jobs))

    def test_extend_claims_moves_only_this_workers_active_leases(self) -> None:
        mine, other_worker, not_listed = insert(self.job_store, held("w1"), held("w2"), held("w1"))
        closed = insert(
            self.job_store, job(status=JobStatus.COMPLETED, claimed_by="w1", claimed_until=at(30))
        )[0]
        self.job_store.extend_claims("w1", [mine.id, other_worker.id, closed.id], at(90))
        self.job_store.extend_claims("w1", [], at(999))
        assert self.job_store.get(mine.id) == mine.evolve(claimed_until=at(90))
        for unchanged in (other_worker, not_listed, closed):
            assert self.job_store.get(unchanged.id) == unchanged

    def test_still_claimed_holds_only_while_the_row_is_as_its_claim_returned_it(self) -> None:
        mine = insert(self.job_store, job(run_at=at(5), occurrence=3, attempt=2))[0]
        (claimed,) = self.job_store.claim_due(at(5), 10, "w1", at(30))  # claimed ahead of its run_at
        assert self.job_store.still_claimed(claimed)
        assert not self.job_store.still_claimed(claimed.evolve(claimed_by="w2"))
        assert not self.job_store.still_claimed(claimed.evolve(occurrence=4))
        assert not self.job_store.still_claimed(claimed.evolve(attempt=3))
        assert not self.job_store.still_claimed(job())  # no such row
        for status in (JobStatus.CANCELLED, JobStatus.PAUSED):  # a cancel, a pause drops the claim
            with self.job_store.transaction() as tx:
                tx.update(
                    claimed.evolve(status=status, claimed_by=None, claimed_until=None), Guard(OPEN_STATUSES)
                )
            assert not self.job_store.still_claimed(claimed)
            assert not self.reopen().still_claimed(claimed)  # as every process reads it
            with self.job_store.transaction() as tx:
                tx.update(claimed, Guard(frozenset({status})))
            assert self.job_store.still_claimed(claimed)
        assert self.job_store.release_claims("w1", [mine.id]) == 1
        assert not self.job_store.still_claimed(claimed)

    def test_still_claimed_many_answers_each_claim_in_order_as_still_claimed_does(self) -> None:
        insert(self.job_store, *(job(run_at=at(5), occurrence=3, attempt=2) for _ in range(3)))
        a, b, c = sorted(self.job_store.claim_due(at(5), 10, "w1", at(30)), key=lambda j: j.id)
        assert self.job_store.still_claimed_many([]) == []
        asked = [a, b.evolve(claimed_by="w2"), c, a.evolve(occurrence=4), job(), c.evolve(attempt=3), b]
        assert self.job_store.still_claimed_many(asked) == [True, False, True, False, False, False, True]
        with self.job_store.transaction() as tx:  # a cancel drops the claim
            tx.update(
                b.evolve(status=JobStatus.CANCELLED, claimed_by=None, claimed_until=None),
                Guard(OPEN_STATUSES),
            )
        assert self.reopen().still_claimed_many([c, b, a]) == [True, False, True]  # as every process reads it
        assert self.job_store.release_claims("w1", [a.id]) == 1
        assert self.job_store.still_claimed_many([a, b, c]) == [False, False, True]

    def test_release_claims_returns_this_workers_rows_to_pending_due_at_once(self) -> None:
        a, b, other = insert(
            self.job_store,
            held("w1", run_at=at(-3), occurrence=4, attempt=2),
            held("w1", run_at=at(-2)),
            held("w2", run_at=at(-1)),
        )
        assert self.job_store.release_claims("w1", [a.id, b.id, other.id]) == 2
        assert self.job_store.release_claims("w1", []) == 0
        released = self.job_store.get(a.id)
        assert released is not None
        assert (released.status, released.occurrence, released.attempt) == (PENDING, 4, 2)
        assert released.claimed_by is None and released.claimed_until is None
        assert ids(self.job_store.claim_due(NOW, 10, "w3", at(30))) == [a.id, b.id]  # due at once
        assert self.job_store.get(other.id) == other
        assert self.job_store.release_claims("w1", [a.id]) == 0  # now claimed by w3

    def test_release_expired_returns_rows_whose_lease_ended_before_now(self) -> None:
        expired = insert(
            self.job_store, *(held(f"w{n}", until=at(-n - 1), occurrence=2, attempt=3) for n in range(3))
        )
        boundary, live = insert(self.job_store, held("w9", until=NOW), held("w9", until=at(1)))
        first = self.job_store.release_expired(NOW, 2)
        rest = self.job_store.release_expired(NOW, 10)
        assert len(first) == 2 and len(rest) == 1
        assert sorted(ids(first + rest)) == sorted(ids(expired))
        for j in first + rest:
            assert (j.status, j.occurrence, j.attempt) == (PENDING, 2, 3)
            assert j.claimed_by is None and j.claimed_until is None
            assert j.updated_at == NOW
            assert self.job_store.get(j.id) == j
        assert self.job_store.release_expired(NOW, 10) == []
        assert self.job_store.get(boundary.id) == boundary and self.job_store.get(live.id) == live

    def test_next_due_at_is_the_earliest_pending_run_at(self) -> None:
        assert self.job_store.next_due_at() is None
        insert(self.job_store, held("w", run_at=at(-100)), job(status=JobStatus.CANCELLED, run_at=at(-50)))
        assert self.job_store.next_due_at() is None
        insert(self.job_store, job(run_at=at(20)), job(run_at=at(10)))
        assert self.job_store.next_due_at() == at(10)
        assert self.job_store.next_due_at().utcoffset().total_seconds() == 0  # type: ignore[union-attr]

    def test_claim_due_planned_claims_and_tells_the_next_due_instant(self) -> None:
        first, second = insert(self.job_store, job(run_at=at(-5)), job(run_at=at(-1)))
        insert(self.job_store, job(run_at=at(20)), job(run_at=at(10)), held("w9", run_at=at(5)))
        claimed, next_due, _ = self.job_store.claim_due_planned(NOW, 10, "w1", at(30))
        assert ids(claimed) == [first.id, second.id]
        assert next_due == at(10)
        assert next_due.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
        assert self.job_store.get(first.id).status is ACTIVE  # type: ignore[union-attr]
        # a full claim may not say when the rest is due: the caller claims again at once
        more = insert(self.job_store, job(run_at=at(-3)), job(run_at=at(-2)))
        claimed, next_due, _ = self.job_store.claim_due_planned(NOW, 1, "w1", at(30))
        assert ids(claimed) == [more[0].id] and next_due is None
        claimed, next_due, _ = self.job_store.claim_due_planned(at(100), 10, "w1", at(130))
        assert len(claimed) == 3 and next_due is None

    def test_scan_open_pages_pending_and_active_rows_in_id_order(self) -> None:
        rows = insert(self.job_store, *(job(status=[PENDING, ACTIVE, *CLOSED][n % 5]) for n in range(15)))
        open_ids = sorted(j.id for j in rows if j.status in (PENDING, ACTIVE))
        assert ids(self.job_store.scan_open(None, 100)) == open_ids
        assert ids(self.job_store.scan_open(None, 4)) == open_ids[:4]
        assert ids(self.job_store.scan_open(open_ids[3], 100)) == open_ids[4:]
        assert self.job_store.scan_open(open_ids[-1], 100) == []

    def test_scan_open_occurrences_are_the_open_rows_keys_in_id_order(self) -> None:
        rows = insert(
            self.job_store,
            *(
                job(status=[PENDING, ACTIVE, *CLOSED][n % 5], occurrence=n, attempt=n % 3, run_at=at(n))
                for n in range(15)
            ),
        )
        expected = [
            OpenOccurrence(Occurrence.of(j), j.status is PENDING)
            for j in sorted(rows, key=lambda j: j.id)
            if j.status in (PENDING, ACTIVE)
        ]
        assert self.job_store.scan_open_occurrences(None, 100) == expected
        assert self.job_store.scan_open_occurrences(None, 4) == expected[:4]
        after = expected[3].occurrence.job_id
        assert self.job_store.scan_open_occurrences(after, 100) == expected[4:]
        assert self.job_store.scan_open_occurrences(expected[-1].occurrence.job_id, 100) == []
        due = self.job_store.scan_open_occurrences(None, 1)[0].occurrence.due_at
        assert due.utcoffset() == timedelta(0)

    def test_scan_pending_due_pages_the_pending_rows_due_by_an_instant_in_due_order(self) -> None:
        scan = provided(self.job_store, DueScan)
        if scan is None:
            pytest.skip("the store has no DueScan (the heal scans in id order only)")
        rows = insert(
            self.job_store,
            *(job(run_at=at(n % 4 * 10 - 10), occurrence=n) for n in range(10)),  # ties: by id
            job(status=JobStatus.ACTIVE, run_at=at(-10)),
            job(status=JobStatus.COMPLETED, run_at=at(-10)),
            job(status=JobStatus.PAUSED, run_at=at(-10)),
        )
        expected = [
            OpenOccurrence(Occurrence.of(j), True)
            for j in sorted(rows, key=lambda j: (j.run_at, j.id))
            if j.status is PENDING and j.run_at <= at(10)
        ]
        assert len(expected) == 8
        assert scan.scan_pending_due(at(10), None, 100) == expected
        assert scan.scan_pending_due(at(10), None, 3) == expected[:3]
        for cut in (2, 3):  # the cursor within a tie and across one
            after = (expected[cut].occurrence.due_at, expected[cut].occurrence.job_id)
            assert scan.scan_pending_due(at(10), after, 100) == expected[cut + 1 :]
        last = expected[-1].occurrence
        assert scan.scan_pending_due(at(10), (last.due_at, last.job_id), 100) == []

    def test_backlog_counts_pending_rows_per_topic_and_the_due_ones(self) -> None:
        assert self.job_store.backlog(NOW) == []
        insert(
            self.job_store,
            job(topic="b.late", run_at=at(-30)),
            job(topic="b.late", run_at=at(-10)),
            job(topic="b.late", run_at=at(60)),
            job(topic="a.later", run_at=at(5)),
            job(topic="a.later", run_at=NOW),
            held("w", run_at=at(-100), topic="c.firing"),
            job(topic="d.done", status=JobStatus.COMPLETED, run_at=at(-100)),
            job(topic="e.paused", status=JobStatus.PAUSED, run_at=at(-100)),
        )
        assert self.job_store.backlog(NOW) == [
            TopicBacklog("a.later", 2, 1, NOW),
            TopicBacklog("b.late", 3, 2, at(-30)),
        ]
        oldest = self.job_store.backlog(NOW)[1].oldest_due
        assert oldest is not None and oldest.utcoffset() == timedelta(0)

    def test_watch_returns_a_function_that_stops_watching(self) -> None:
        calls: list[datetime | None] = []
        stop = self.job_store.watch(calls.append)
        stop()
        calls.clear()  # a watcher may report once as it starts ("anything sent while away")
        insert(self.job_store, job())  # after stop: must not raise, whatever the backend
        time.sleep(0.5)  # ten SQLite data_version polls, and PostgreSQL's notify round trip
        assert calls == []  # stopped: the schedule above is not reported
