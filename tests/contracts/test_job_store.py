"""The JobStore contract (schedule_sdk/ports.py), part 1: transactions, reads, updates, listing.

Every test runs on every store (memory, sqlite, postgres); claims are in test_job_store_claims.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, timedelta, timezone

import pytest

from schedule_sdk.domain.errors import ClientRequestIdInUse
from schedule_sdk.domain.jobs import (
    Backoff,
    CronRepeat,
    IntervalRepeat,
    JobMetadata,
    JobQuery,
    MisfirePolicy,
    RetryPolicy,
    ScheduledJob,
)
from schedule_sdk.domain.status import OPEN_STATUSES, JobStatus
from schedule_sdk.ports import Guard, JobStore

from .jobs import NOW, at, ids, insert, job

PLUS_5 = timezone(timedelta(hours=5, minutes=30))


def full_job() -> ScheduledJob:
    """Every field set to a non-default value; times in a non-UTC offset."""
    return job(
        topic="billing.invoice-due_v2",
        status=JobStatus.ACTIVE,
        run_at=NOW.astimezone(PLUS_5),
        scheduled_for=(NOW - timedelta(seconds=3)).astimezone(PLUS_5),
        timezone="America/Argentina/Buenos_Aires",
        payload={"n": 1, "f": 1.5, "s": "é ✓ 日本", "l": [1, None, True], "o": {"x": {"y": []}}},
        metadata=JobMetadata(owner_id="u1", tenant_id="t1", correlation_id="c1", client_request_id="r1"),
        repeat=CronRepeat(expression="*/5 * * * *", timezone="Europe/Paris"),
        retry=RetryPolicy(attempts=5, backoff=Backoff(type="exponential", delay_ms=250)),
        occurrence=7,
        attempt=3,
        occurrence_count=6,
        limit=10,
        ends_at=NOW + timedelta(days=30),
        last_fired_at=NOW - timedelta(minutes=5),
        last_error="ListenerFailed: boom",
        claimed_by="host:1:abcdefgh",
        claimed_until=NOW + timedelta(seconds=30),
        created_at=NOW - timedelta(days=1, microseconds=1),
        updated_at=NOW - timedelta(microseconds=7),
        rescheduled_from="01900000-0000-7000-8000-000000000001",
        rescheduled_to="01900000-0000-7000-8000-000000000002",
        misfire=MisfirePolicy(mode="fire_all", grace_ms=1500, max_catch_up=7),
        regular_due=(NOW + timedelta(minutes=5, microseconds=3)).astimezone(PLUS_5),
    )


TIME_FIELDS = (
    "run_at",
    "scheduled_for",
    "ends_at",
    "last_fired_at",
    "claimed_until",
    "created_at",
    "updated_at",
    "regular_due",
)


def assert_utc(j: ScheduledJob) -> None:
    for name in TIME_FIELDS:
        value = getattr(j, name)
        if value is not None:
            assert value.utcoffset() == timedelta(0), (name, value)


# -- insert / get ---------------------------------------------------------------------------------


def test_insert_then_get_returns_every_field_with_times_as_aware_utc(job_store: JobStore) -> None:
    written = full_job()
    insert(job_store, written)
    read = job_store.get(written.id)
    assert read == written
    assert read is not None
    assert_utc(read)
    assert read.run_at.tzinfo is not None and read.run_at == NOW


def test_roundtrip_of_a_minimal_job_and_an_interval_job(job_store: JobStore) -> None:
    minimal = job()
    interval = job(repeat=IntervalRepeat(every_ms=90_000), payload={})
    insert(job_store, minimal, interval)
    assert job_store.get(minimal.id) == minimal
    assert job_store.get(interval.id) == interval


def test_get_of_an_unknown_id_is_none(job_store: JobStore) -> None:
    assert job_store.get("01900000-0000-7000-8000-00000000dead") is None
    with job_store.transaction() as tx:
        assert tx.get("01900000-0000-7000-8000-00000000dead") is None


def test_a_transaction_reads_its_own_writes(job_store: JobStore) -> None:
    j = job()
    with job_store.transaction() as tx:
        tx.insert(j)
        assert tx.get(j.id) == j
        assert tx.get(j.id, for_update=True) == j


def test_nothing_is_visible_to_others_until_commit(job_store: JobStore) -> None:
    j = job()
    seen: list[ScheduledJob | None] = []
    with job_store.transaction() as tx:
        tx.insert(j)
        reader = threading.Thread(target=lambda: seen.append(job_store.get(j.id)))
        reader.start()
        reader.join(timeout=10)
        assert not reader.is_alive(), "a reader waited for a writer"
    assert seen == [None]
    assert job_store.get(j.id) == j


def test_leaving_the_block_with_an_exception_rolls_everything_back(job_store: JobStore) -> None:
    existing = insert(job_store, job())[0]
    new = job()
    with pytest.raises(RuntimeError, match="abort"), job_store.transaction() as tx:
        tx.insert(new)
        assert tx.update(existing.evolve(status=JobStatus.CANCELLED), Guard(OPEN_STATUSES))
        raise RuntimeError("abort")
    assert job_store.get(new.id) is None
    assert job_store.get(existing.id) == existing
    insert(job_store, new)  # the id is free again: nothing of the failed transaction remains
    assert job_store.get(new.id) == new


# -- client_request_id ----------------------------------------------------------------------------


def test_a_used_client_request_id_is_refused_and_nothing_is_written(job_store: JobStore) -> None:
    first = job(metadata=JobMetadata(client_request_id="req-1"), status=JobStatus.CANCELLED)
    insert(job_store, first)
    other, duplicate = job(), job(metadata=JobMetadata(client_request_id="req-1", owner_id="x"))
    with pytest.raises(ClientRequestIdInUse) as caught, job_store.transaction() as tx:
        tx.insert(other)
        tx.insert(duplicate)
    assert caught.value.code == "SCHEDULE_CLIENT_REQUEST_ID_IN_USE"
    assert caught.value.client_request_id == "req-1"
    assert job_store.get(other.id) is None and job_store.get(duplicate.id) is None
    assert job_store.get(first.id) == first


def test_a_client_request_id_is_unique_within_one_transaction(job_store: JobStore) -> None:
    a, b = (job(metadata=JobMetadata(client_request_id="same")) for _ in range(2))
    with pytest.raises(ClientRequestIdInUse), job_store.transaction() as tx:
        tx.insert(a)
        tx.insert(b)
    assert job_store.get(a.id) is None


def test_jobs_without_client_request_id_never_clash(job_store: JobStore) -> None:
    jobs = insert(job_store, *(job() for _ in range(3)))
    assert all(job_store.get(j.id) == j for j in jobs)


@pytest.mark.parametrize("round_", range(5))
def test_two_racing_transactions_with_one_client_request_id_exactly_one_wins(
    job_store: JobStore, reopen: Callable[[], JobStore], round_: int
) -> None:
    stores = [job_store, reopen()]
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

    threads = [threading.Thread(target=attempt, args=pair) for pair in zip(stores, candidates, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(outcomes) == ["lost", "won"]
    assert sum(job_store.get(j.id) is not None for j in candidates) == 1


# -- insert_many ---------------------------------------------------------------------------------


def test_insert_many_writes_every_row_in_one_transaction(job_store: JobStore) -> None:
    jobs = [full_job(), job(), job(repeat=IntervalRepeat(every_ms=1000), payload={"i": 2})]
    with job_store.transaction() as tx:
        tx.insert_many(jobs)
        assert tx.get(jobs[1].id) == jobs[1]
    assert [job_store.get(j.id) for j in jobs] == jobs
    with job_store.transaction() as tx:
        tx.insert_many([])


def test_insert_many_rolls_back_with_its_transaction(job_store: JobStore) -> None:
    jobs = [job(), job()]
    with pytest.raises(RuntimeError, match="abort"), job_store.transaction() as tx:
        tx.insert_many(jobs)
        raise RuntimeError("abort")
    assert [job_store.get(j.id) for j in jobs] == [None, None]


def test_insert_many_refuses_a_used_client_request_id_naming_it(job_store: JobStore) -> None:
    first = insert(job_store, job(metadata=JobMetadata(client_request_id="req-1")))[0]
    batch = [job(metadata=JobMetadata(client_request_id=f"new-{i}")) for i in range(3)]
    batch.insert(2, job(metadata=JobMetadata(client_request_id="req-1")))
    with pytest.raises(ClientRequestIdInUse) as caught, job_store.transaction() as tx:
        tx.insert_many(batch)
    assert caught.value.client_request_id == "req-1"
    assert all(job_store.get(j.id) is None for j in batch)
    assert job_store.get(first.id) == first


def test_insert_many_refuses_a_client_request_id_used_twice_in_the_batch(job_store: JobStore) -> None:
    batch = [job(metadata=JobMetadata(client_request_id=name)) for name in ("a", "b", "a")]
    with pytest.raises(ClientRequestIdInUse) as caught, job_store.transaction() as tx:
        tx.insert_many(batch)
    assert caught.value.client_request_id == "a"
    assert all(job_store.get(j.id) is None for j in batch)


# -- update / update_many -------------------------------------------------------------------------


def moved_on(j: ScheduledJob) -> ScheduledJob:
    """``j`` with every mutable field changed (and some immutable ones, which must not be written)."""
    return j.evolve(
        status=JobStatus.PENDING,
        run_at=at(3600),
        scheduled_for=at(3500),
        occurrence=j.occurrence + 1,
        attempt=2,
        occurrence_count=j.occurrence_count + 1,
        last_fired_at=at(1).astimezone(PLUS_5),
        last_error="E: x",
        claimed_by=None,
        claimed_until=None,
        updated_at=at(2),
        rescheduled_to="01900000-0000-7000-8000-000000000003",
        regular_due=at(4000),
    )


def test_update_writes_every_mutable_field_when_the_guard_holds(job_store: JobStore) -> None:
    j = insert(job_store, job(status=JobStatus.ACTIVE, claimed_by="w1", claimed_until=at(30)))[0]
    new = moved_on(j)
    with job_store.transaction() as tx:
        assert tx.update(new, Guard(frozenset({JobStatus.ACTIVE}), claimed_by="w1", occurrence=1))
    assert job_store.get(j.id) == new


def test_update_leaves_immutable_fields_alone(job_store: JobStore) -> None:
    j = insert(job_store, job(payload={"a": 1}, metadata=JobMetadata(owner_id="o")))[0]
    tampered = j.evolve(
        topic="other",
        payload={"b": 2},
        metadata=JobMetadata(owner_id="p"),
        timezone="Asia/Tokyo",
        created_at=at(99),
        retry=RetryPolicy(attempts=3),
        rescheduled_from=j.id,
        misfire=MisfirePolicy(mode="skip"),
        status=JobStatus.CANCELLED,
    )
    with job_store.transaction() as tx:
        assert tx.update(tampered, Guard(OPEN_STATUSES))
    assert job_store.get(j.id) == j.evolve(status=JobStatus.CANCELLED)


@pytest.mark.parametrize(
    "guard",
    [
        pytest.param(Guard(frozenset({JobStatus.PENDING})), id="status"),
        pytest.param(Guard(frozenset({JobStatus.ACTIVE}), claimed_by="w2", occurrence=1), id="worker"),
        pytest.param(Guard(frozenset({JobStatus.ACTIVE}), claimed_by="w1", occurrence=2), id="occurrence"),
    ],
)
def test_update_returns_false_and_writes_nothing_when_the_guard_fails(
    job_store: JobStore, guard: Guard
) -> None:
    j = insert(job_store, job(status=JobStatus.ACTIVE, claimed_by="w1", claimed_until=at(30)))[0]
    with job_store.transaction() as tx:
        assert tx.update(moved_on(j), guard) is False
    assert job_store.get(j.id) == j


def test_update_of_a_missing_row_returns_false(job_store: JobStore) -> None:
    with job_store.transaction() as tx:
        assert tx.update(job(), Guard(OPEN_STATUSES)) is False


def test_update_many_writes_the_rows_whose_guard_holds_and_leaves_the_rest(job_store: JobStore) -> None:
    a, b, c, d = insert(
        job_store,
        job(status=JobStatus.ACTIVE, claimed_by="w1", claimed_until=at(30)),
        job(status=JobStatus.ACTIVE, claimed_by="w1", claimed_until=at(30)),
        job(status=JobStatus.ACTIVE, claimed_by="w2", claimed_until=at(30)),
        job(),
    )
    held = frozenset({JobStatus.ACTIVE})
    with job_store.transaction() as tx:
        tx.update_many(
            [
                (moved_on(a), Guard(held, claimed_by="w1", occurrence=1)),
                (moved_on(b), Guard(held, claimed_by="w1", occurrence=1)),
                (moved_on(c), Guard(held, claimed_by="w1", occurrence=1)),  # claimed by w2
                (d.evolve(status=JobStatus.CANCELLED), Guard(frozenset({JobStatus.PENDING}))),
            ]
        )
        tx.update_many([])
    assert job_store.get(a.id) == moved_on(a)
    assert job_store.get(b.id) == moved_on(b)
    assert job_store.get(c.id) == c
    assert job_store.get(d.id) == d.evolve(status=JobStatus.CANCELLED)


# -- list_jobs ------------------------------------------------------------------------------------


@pytest.fixture
def listed(job_store: JobStore) -> list[ScheduledJob]:
    """12 jobs in creation order over 2 owners, 2 tenants, 2 topics, 3 statuses."""
    statuses = [JobStatus.PENDING, JobStatus.COMPLETED, JobStatus.CANCELLED]
    jobs = [
        job(
            topic=f"topic-{n % 2}",
            status=statuses[n % 3],
            metadata=JobMetadata(owner_id=f"o{n % 2}", tenant_id=f"t{n // 6}"),
        )
        for n in range(12)
    ]
    return insert(job_store, *reversed(jobs))  # insertion order must not matter


def expected(jobs: list[ScheduledJob], keep: Callable[[ScheduledJob], bool]) -> list[str]:
    return sorted(j.id for j in jobs if keep(j))


def test_list_jobs_is_in_ascending_id_order_up_to_limit(
    job_store: JobStore, listed: list[ScheduledJob]
) -> None:
    assert ids(job_store.list_jobs(JobQuery(limit=100))) == sorted(ids(listed))
    assert ids(job_store.list_jobs(JobQuery(limit=5))) == sorted(ids(listed))[:5]


@pytest.mark.parametrize(
    ("query", "keep"),
    [
        (JobQuery(owner_id="o1"), lambda j: j.metadata.owner_id == "o1"),
        (JobQuery(tenant_id="t0"), lambda j: j.metadata.tenant_id == "t0"),
        (JobQuery(topic="topic-0"), lambda j: j.topic == "topic-0"),
        (JobQuery(statuses=frozenset({JobStatus.PENDING})), lambda j: j.status == "pending"),
        (
            JobQuery(
                statuses=frozenset({JobStatus.PENDING, JobStatus.CANCELLED}), tenant_id="t1", owner_id="o0"
            ),
            lambda j: (
                j.status != "completed" and j.metadata.tenant_id == "t1" and j.metadata.owner_id == "o0"
            ),
        ),
        (JobQuery(owner_id="nobody"), lambda j: False),
    ],
)
def test_list_jobs_applies_every_given_filter(
    job_store: JobStore, listed: list[ScheduledJob], query: JobQuery, keep: Callable[[ScheduledJob], bool]
) -> None:
    assert ids(job_store.list_jobs(query)) == expected(listed, keep)


def test_list_jobs_pages_by_keyset_after_id(job_store: JobStore, listed: list[ScheduledJob]) -> None:
    pages: list[list[str]] = []
    after = None
    while page := job_store.list_jobs(JobQuery(owner_id="o0", limit=2, after_id=after)):
        pages.append(ids(page))
        after = page[-1].id
    assert [i for p in pages for i in p] == expected(listed, lambda j: j.metadata.owner_id == "o0")
    assert all(len(p) == 2 for p in pages)
    # a row inserted after paging began, with a higher id, shows up on a later page
    late = insert(job_store, job(metadata=JobMetadata(owner_id="o0")))[0]
    assert ids(job_store.list_jobs(JobQuery(owner_id="o0", after_id=after))) == [late.id]


def test_every_read_returns_aware_utc(job_store: JobStore, listed: list[ScheduledJob]) -> None:
    for j in job_store.list_jobs(JobQuery(limit=100)):
        assert_utc(j)
        assert j.run_at.tzinfo is not None
        assert j.run_at.astimezone(UTC) == NOW
