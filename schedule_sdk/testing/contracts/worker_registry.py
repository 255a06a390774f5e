"""The :class:`~schedule_sdk.ports.WorkerRegistry` capability's contract suite:
:class:`WorkerRegistryContract` (also importable from :mod:`.job_store`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import (
    RestartRepair,
    WorkerRegistry,
    provided,
    require,
)
from schedule_sdk.testing.contracts.rows import NOW, at, ids, insert, job
from schedule_sdk.testing.contracts.store import (
    PENDING,
    StoreContract,
    held_due,
    worker,
)


class WorkerRegistryContract(StoreContract):
    """The :class:`~schedule_sdk.ports.WorkerRegistry` capability: the worker registry and dead
    workers' claims (``beat``, ``release_dead`` ...); and, when the store has it, the
    :class:`~schedule_sdk.ports.RestartRepair` capability (skipped without it)."""

    @property
    def registry(self) -> WorkerRegistry:
        """The current test's store, as the capability under test."""
        return require(self.job_store, WorkerRegistry, "WorkerRegistryContract")

    def test_beat_registers_a_worker_then_updates_only_its_beat_in_flight_stuck_and_clock(self) -> None:
        assert self.registry.workers() == []
        first = worker("w1", node=None)
        self.registry.beat(first)
        self.registry.beat(worker("w0", beat=-5, in_flight=3, stuck=1, clock_offset=-0.25, clock_error=0.001))
        assert self.registry.workers() == [
            worker("w0", beat=-5, in_flight=3, stuck=1, clock_offset=-0.25, clock_error=0.001),
            first,
        ]
        self.registry.beat(
            replace(
                first,
                last_beat=at(1),
                in_flight=7,
                stuck=2,
                host="other",
                pid=1,
                started_at=at(0),
                clock_offset=1.5,
                clock_error=0.002,
            )
        )
        reopened = require(self.reopen(), WorkerRegistry, "WorkerRegistryContract")
        assert reopened.workers()[1] == replace(
            first, last_beat=at(1), in_flight=7, stuck=2, clock_offset=1.5, clock_error=0.002
        )

    def test_store_clock_is_none_or_the_stores_aware_utc_now(self) -> None:
        before = datetime.now(UTC)
        read = self.registry.store_clock()
        after = datetime.now(UTC)
        if read is not None:  # a store with a clock of its own: on this test machine, the same time
            assert read.tzinfo is not None and read.utcoffset() == timedelta(0)
            assert before - timedelta(seconds=1) <= read <= after + timedelta(seconds=1)

    def test_remove_worker_deletes_its_row_and_ignores_unknown_ids(self) -> None:
        self.registry.beat(worker("w1"))
        self.registry.beat(worker("w2"))
        self.registry.remove_worker("w1")
        self.registry.remove_worker("nobody")
        assert [x.id for x in self.registry.workers()] == ["w2"]

    def test_release_dead_releases_active_claims_of_workers_whose_beat_is_too_old(self) -> None:
        self.registry.beat(worker("dead", beat=-11))
        self.registry.beat(worker("live", beat=-1))
        dead_claims = insert(self.job_store, *(held_due("dead", occurrence=2, attempt=3) for _ in range(3)))
        live_claim, unregistered = insert(self.job_store, held_due("live"), held_due("stock-rq-worker"))
        finished = insert(self.job_store, job(status=JobStatus.COMPLETED, claimed_by="dead"))[0]
        first = self.registry.release_dead(at(-10), [], NOW, 2)
        rest = self.registry.release_dead(at(-10), [], NOW, 10)
        assert len(first) == 2 and len(rest) == 1
        assert sorted(ids(first + rest)) == sorted(ids(dead_claims))
        for j in first + rest:
            assert (j.status, j.occurrence, j.attempt) == (PENDING, 2, 3)
            assert j.claimed_by is None and j.claimed_until is None and j.updated_at == NOW
            assert self.job_store.get(j.id) == j
        assert self.registry.release_dead(at(-10), [], NOW, 10) == []
        for untouched in (live_claim, unregistered, finished):
            assert self.job_store.get(untouched.id) == untouched
        assert [x.id for x in self.registry.workers()] == ["dead", "live"]  # rows stay until forgotten

    def test_release_dead_also_releases_the_named_workers_but_only_registered_ones(self) -> None:
        self.registry.beat(worker("gone", beat=0))
        gone, unregistered = insert(self.job_store, held_due("gone"), held_due("ghost"))
        released = self.registry.release_dead(at(-10), ["gone", "ghost"], NOW, 10)
        assert ids(released) == [gone.id]
        assert self.job_store.get(unregistered.id) == unregistered

    def test_a_worker_that_beats_again_keeps_its_claims(self) -> None:
        self.registry.beat(worker("w1", beat=-20))
        claim = insert(self.job_store, held_due("w1"))[0]
        self.registry.beat(worker("w1", beat=0))  # resumed before anyone released it
        assert self.registry.release_dead(at(-10), [], NOW, 10) == []
        assert self.job_store.get(claim.id) == claim

    def test_forget_workers_deletes_rows_whose_beat_is_older_than_the_cutoff(self) -> None:
        for n, beat in enumerate((-7200, -3601, -3600, 0)):
            self.registry.beat(worker(f"w{n}", beat=beat))
        assert self.registry.forget_workers(at(-3600)) == 2
        assert [x.id for x in self.registry.workers()] == ["w2", "w3"]
        assert self.registry.forget_workers(at(-3600)) == 0

    def test_claims_of_and_release_claims_at_free_a_live_workers_claims_at_their_occurrence(self) -> None:
        repair = provided(self.job_store, RestartRepair)
        if repair is None:
            pytest.skip("the store has no RestartRepair (such claims wait for their leases)")
        mine = insert(self.job_store, held_due("w1", occurrence=2, attempt=3), held_due("w1"))
        other, done = insert(self.job_store, held_due("w2"), job(status=JobStatus.COMPLETED, claimed_by="w1"))
        assert sorted(repair.claims_of("w1")) == sorted((j.id, j.occurrence, j.attempt) for j in mine)
        stale = (mine[1].id, mine[1].occurrence + 1, mine[1].attempt)  # the row moved on since
        released = repair.release_claims_at("w1", [(mine[0].id, 2, 3), stale, (other.id, 1, 1)], NOW)
        assert ids(released) == [mine[0].id]
        assert (released[0].status, released[0].occurrence, released[0].attempt) == (PENDING, 2, 3)
        assert released[0].claimed_by is None and released[0].updated_at == NOW
        assert self.job_store.get(mine[0].id) == released[0]
        for untouched in (mine[1], other, done):
            assert self.job_store.get(untouched.id) == untouched
        assert repair.release_claims_at("w1", [], NOW) == []

    def test_store_incarnation_is_none_or_the_same_while_the_store_runs(self) -> None:
        repair = provided(self.job_store, RestartRepair)
        if repair is None:
            pytest.skip("the store has no RestartRepair")
        assert repair.store_incarnation() == repair.store_incarnation()
