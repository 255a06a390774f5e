"""The concurrency-key sentences of the :class:`~schedule_sdk.ports.JobStore` contract: a claim
never lets more than a job's limit of its key run at once (counting the key's active rows, in
every process), claims a key's waiting rows in due order, and the waiting rows are left out of
``next_due_at(now)``, listed by ``JobTransaction.waiting`` and counted by ``concurrency_load``.

Run it next to :class:`~schedule_sdk.testing.contracts.job_store.JobStoreContract`::

    class TestMyStoreConcurrency(ConcurrencyContract):
        def open_store(self):
            return MyJobStore(...)
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest

from schedule_sdk.domain.jobs import ConcurrencyLimit, ScheduledJob
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import Guard, JobStore, KeyLoad, Occurrence
from schedule_sdk.testing.contracts.rows import NOW, at, ids, insert, job
from schedule_sdk.testing.contracts.store import StoreContract

ACTIVE, PENDING = JobStatus.ACTIVE, JobStatus.PENDING


def keyed(key: str = "reports", limit: int = 2, **changes: object) -> ScheduledJob:
    """A pending one-shot job due ``NOW`` (unless told otherwise) with a concurrency limit."""
    return job(concurrency=ConcurrencyLimit(key=key, limit=limit), **changes)


def finish(store: JobStore, claimed: list[ScheduledJob]) -> None:
    """Record claimed jobs as completed (their slots free), as the fire path would."""
    with store.transaction() as tx:
        tx.update_many(
            [
                (j.moved(JobStatus.COMPLETED, NOW, claimed_by=None, claimed_until=None), _held_by(j))
                for j in claimed
            ]
        )


def _held_by(j: ScheduledJob) -> Guard:
    return Guard(frozenset({ACTIVE}), claimed_by=j.claimed_by, occurrence=j.occurrence)


def running(store: JobStore) -> Counter[str]:
    """Active rows per key, read from the store."""
    found: Counter[str] = Counter()
    after = None
    while page := store.scan_open(after, 500):
        after = page[-1].id
        found.update(j.concurrency.key for j in page if j.status is ACTIVE and j.concurrency is not None)
    return found


class ConcurrencyContract(StoreContract):
    """Concurrency keys in the job store's claims and reads."""

    def test_a_limit_roundtrips_and_a_job_without_one_has_none(self) -> None:
        with_key, without = insert(self.job_store, keyed("tenant-7:exports", 3), job())
        assert self.job_store.get(with_key.id) == with_key
        assert self.job_store.get(without.id).concurrency is None  # type: ignore[union-attr]

    def test_claim_due_claims_at_most_the_limit_of_a_key_earliest_first(self) -> None:
        rows = insert(self.job_store, *(keyed(run_at=at(-n)) for n in range(5)), job(run_at=at(-1)))
        claimed = self.job_store.claim_due(NOW, 100, "w1", at(30))
        earliest = sorted(rows[:5], key=lambda j: j.run_at)[:2]
        assert sorted(ids(claimed)) == sorted([*ids(earliest), rows[5].id])
        assert self.job_store.claim_due(NOW, 100, "w1", at(30)) == []
        assert {self.job_store.get(j.id).status for j in rows[:5] if j not in earliest} == {PENDING}  # type: ignore[union-attr]

    def test_the_keys_active_rows_count_whoever_holds_them(self) -> None:
        insert(self.job_store, keyed(status=ACTIVE, claimed_by="w0", claimed_until=at(30), run_at=at(-9)))
        waiting = insert(self.job_store, *(keyed(run_at=at(-n)) for n in range(3)))
        (claimed,) = self.job_store.claim_due(NOW, 100, "w1", at(30))
        assert claimed.id == min(waiting, key=lambda j: j.run_at).id

    def test_keys_are_independent_and_rows_without_a_key_are_never_held_back(self) -> None:
        insert(self.job_store, *(keyed("a", 1, run_at=at(-n)) for n in range(3)))
        insert(self.job_store, *(keyed("b", 2, run_at=at(-n)) for n in range(3)))
        free = insert(self.job_store, *(job(run_at=at(-n)) for n in range(4)))
        claimed = self.job_store.claim_due(NOW, 100, "w1", at(30))
        keys = Counter(j.concurrency.key if j.concurrency else None for j in claimed)
        assert keys == {"a": 1, "b": 2, None: 4}
        assert set(ids(free)) <= set(ids(claimed))

    @pytest.mark.parametrize("many", [False, True], ids=["claim_due", "claim_many"])
    def test_keys_that_read_as_null_or_need_quoting_are_claimed_and_limited(self, many: bool) -> None:
        names = ["NULL", "null", "a.b", "x:y-z_1", "007", "A" * 200]
        rows = insert(self.job_store, *(keyed(k, 1, run_at=at(-n)) for k in names for n in range(2)))
        keys = [(j.id, 1, 1) for j in rows]
        claimed = (
            self.job_store.claim_many(keys, NOW, "w1", at(30))
            if many
            else self.job_store.claim_due(NOW, 100, "w1", at(30))
        )
        assert Counter(j.concurrency.key for j in claimed if j.concurrency) == dict.fromkeys(names, 1)

    def test_a_freed_slot_lets_the_next_waiting_row_in_due_order(self) -> None:
        rows = insert(self.job_store, *(keyed(limit=1, run_at=at(-10 + n)) for n in range(3)))
        for expected in rows:
            claimed = self.job_store.claim_due(NOW, 100, "w1", at(30))
            assert ids(claimed) == [expected.id]
            assert self.job_store.claim_due(NOW, 100, "w1", at(30)) == []
            finish(self.job_store, claimed)

    def test_each_job_applies_its_own_limit(self) -> None:
        insert(self.job_store, keyed(limit=3, status=ACTIVE, claimed_by="w0", claimed_until=at(30)))
        strict, loose = insert(self.job_store, keyed(limit=1, run_at=at(-5)), keyed(limit=3, run_at=at(-4)))
        claimed = self.job_store.claim_due(NOW, 100, "w1", at(30))
        assert ids(claimed) == [loose.id]  # the strict one waits while any of the key runs
        assert self.job_store.get(strict.id).status is PENDING  # type: ignore[union-attr]

    def test_claim_due_counts_keyed_rows_against_its_own_limit(self) -> None:
        insert(self.job_store, *(keyed(limit=5, run_at=at(-n)) for n in range(5)))
        assert len(self.job_store.claim_due(NOW, 2, "w1", at(30))) == 2
        assert len(self.job_store.claim_due(NOW, 10, "w1", at(30))) == 3

    def test_claim_many_honours_the_limit_among_the_given_rows_in_due_order(self) -> None:
        rows = insert(self.job_store, *(keyed(run_at=at(-n)) for n in range(4)))
        given = [(j.id, 1, 1) for j in rows[:3]]
        claimed = self.job_store.claim_many(given, NOW, "w1", at(30))
        assert sorted(ids(claimed)) == sorted([rows[1].id, rows[2].id])  # the two earliest given
        assert self.job_store.claim_many([(rows[0].id, 1, 1)], NOW, "w1", at(30)) == []
        finish(self.job_store, claimed[:1])
        assert ids(self.job_store.claim_many([(rows[0].id, 1, 1)], NOW, "w1", at(30))) == [rows[0].id]

    def test_claim_many_still_claims_exactly_the_given_occurrence(self) -> None:
        (row,) = insert(self.job_store, keyed(occurrence=2, attempt=1))
        assert self.job_store.claim_many([(row.id, 1, 1), (row.id, 2, 2)], NOW, "w1", at(30)) == []
        assert ids(self.job_store.claim_many([(row.id, 2, 1)], NOW, "w1", at(30))) == [row.id]

    @pytest.mark.parametrize("many", [False, True], ids=["claim_due", "claim_many"])
    def test_racing_claimers_never_exceed_a_keys_limit(self, many: bool) -> None:
        rows = insert(
            self.job_store,
            *(keyed("a", 3, run_at=at(-(n % 7))) for n in range(24)),
            *(keyed("b", 1, run_at=at(-(n % 5))) for n in range(8)),
        )
        stores = [self.job_store, self.job_store, self.reopen(), self.reopen()]
        keys = [(j.id, 1, 1) for j in rows]
        rounds = 0
        while any(self.job_store.get(j.id).status is PENDING for j in rows):  # type: ignore[union-attr]
            rounds += 1
            assert rounds <= 30, "the waiting rows are not all claimed"
            claimed = self._race(
                stores,
                lambda s, w: s.claim_many(keys, NOW, w, at(30)) if many else s.claim_due(NOW, 5, w, at(30)),
            )
            per_key = Counter(j.concurrency.key for j in claimed if j.concurrency)
            assert per_key["a"] <= 3 and per_key["b"] <= 1, per_key
            assert running(self.job_store) == per_key
            finish(self.job_store, claimed)
        assert rounds >= 8  # key b lets one through per round

    def _race(
        self, stores: list[JobStore], claim: Callable[[JobStore, str], list[ScheduledJob]]
    ) -> list[ScheduledJob]:
        barrier = threading.Barrier(len(stores))
        claimed: list[ScheduledJob] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def claimer(store: JobStore, worker: str) -> None:
            try:
                barrier.wait()
                batch = claim(store, worker)
                with lock:
                    claimed.extend(batch)
            except BaseException as error:  # surfaced below
                errors.append(error)

        threads = [threading.Thread(target=claimer, args=(s, f"w{n}")) for n, s in enumerate(stores)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors, errors
        assert len(set(ids(claimed))) == len(claimed), "a row was claimed twice"
        return claimed

    def test_next_due_at_with_now_leaves_out_the_waiting_rows(self) -> None:
        insert(self.job_store, keyed(limit=1, run_at=at(-5)), keyed(limit=1, run_at=at(-3)))
        later = insert(self.job_store, keyed(limit=1, run_at=at(20)), job(run_at=at(40)))[0]
        self.job_store.claim_due(NOW, 100, "w1", at(30))
        assert self.job_store.next_due_at() == at(-3)
        assert self.job_store.next_due_at(NOW) == later.run_at

    def test_claim_due_planned_leaves_the_waiting_rows_out_of_the_next_due_instant(self) -> None:
        first = insert(self.job_store, keyed(limit=1, run_at=at(-5)), keyed(limit=1, run_at=at(-3)))[0]
        later = insert(self.job_store, keyed(limit=1, run_at=at(20)), job(run_at=at(40)))[0]
        claimed, next_due, waiting = self.job_store.claim_due_planned(NOW, 100, "w1", at(30))
        assert ids(claimed) == [first.id]
        assert next_due == later.run_at
        assert waiting  # the second row of the key waits for its slot

    def test_next_due_at_with_now_keeps_due_rows_without_a_key(self) -> None:
        insert(self.job_store, keyed(run_at=at(-5)), job(run_at=at(-2)))
        assert self.job_store.next_due_at(NOW) == at(-2)

    def test_waiting_lists_the_earliest_due_pending_rows_of_the_keys(self) -> None:
        a = insert(self.job_store, *(keyed("a", run_at=at(-n)) for n in range(4)))
        insert(self.job_store, keyed("b", run_at=at(-1)), keyed("a", run_at=at(5)), job(run_at=at(-1)))
        with self.job_store.transaction() as tx:
            found = tx.waiting(["a"], NOW, 2)
        expected = sorted(a, key=lambda j: j.run_at)[:2]
        assert sorted(found, key=lambda o: o.due_at) == [Occurrence.of(j) for j in expected]

    def test_waiting_lists_the_first_of_each_key_however_many_wait(self) -> None:
        a = insert(self.job_store, *(keyed("a", run_at=at(-n)) for n in range(1, 30)))
        b = insert(self.job_store, *(keyed("b", run_at=at(-n - 0.5)) for n in range(1, 4)))
        with self.job_store.transaction() as tx:
            found = tx.waiting(["a", "b", "c"], NOW, 3)
        expected = [*sorted(a, key=lambda j: j.run_at)[:3], *sorted(b, key=lambda j: j.run_at)[:3]]
        assert sorted(found, key=lambda o: (o.due_at, o.job_id)) == sorted(
            (Occurrence.of(j) for j in expected), key=lambda o: (o.due_at, o.job_id)
        )

    def test_waiting_sees_the_transactions_own_writes(self) -> None:
        (held,) = insert(self.job_store, keyed(limit=1, status=ACTIVE, claimed_by="w0", claimed_until=at(30)))
        (waiting,) = insert(self.job_store, keyed(limit=1, run_at=at(-1)))
        with self.job_store.transaction() as tx:
            tx.update(held.moved(JobStatus.COMPLETED, NOW), _held_by(held))
            assert tx.waiting(["reports"], NOW, 1) == [Occurrence.of(waiting)]

    def test_concurrency_load_counts_running_and_waiting_per_key(self) -> None:
        assert self.job_store.concurrency_load(NOW) == []
        insert(
            self.job_store,
            keyed("a", 2, status=ACTIVE, claimed_by="w0", claimed_until=at(30)),
            keyed("a", 4, run_at=at(-7)),
            keyed("a", 2, run_at=at(-2)),
            keyed("a", 2, run_at=at(60)),
            keyed("b", 1, run_at=at(60)),
            keyed("c", 1, status=JobStatus.COMPLETED),
            job(run_at=at(-1)),
        )
        assert self.job_store.concurrency_load(NOW) == [
            KeyLoad("a", 4, 1, 2, at(-7)),
            KeyLoad("b", 1, 0, 0, None),
        ]
