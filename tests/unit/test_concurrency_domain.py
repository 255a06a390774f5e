"""The concurrency rule (domain/concurrency.py) and the ConcurrencyLimit value, on plain values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import ConcurrencyLimit
from schedule_sdk.domain.concurrency import admitted, running_per_key
from schedule_sdk.domain.declared import Declaration
from schedule_sdk.domain.errors import InvalidConcurrency
from schedule_sdk.domain.jobs import JobMetadata, RetryPolicy, ScheduledJob
from schedule_sdk.domain.status import JobStatus

T0 = datetime(2031, 1, 1, tzinfo=UTC)


def row(n: int, key: str | None = None, limit: int = 2) -> ScheduledJob:
    due = T0 + timedelta(seconds=n)
    return ScheduledJob(
        id=f"job-{n}",
        topic="t",
        status=JobStatus.PENDING,
        run_at=due,
        scheduled_for=due,
        timezone="UTC",
        payload=None,
        metadata=JobMetadata(),
        repeat=None,
        retry=RetryPolicy(),
        created_at=T0,
        updated_at=T0,
        concurrency=None if key is None else ConcurrencyLimit(key=key, limit=limit),
    )


def test_jobs_without_a_key_are_always_admitted():
    due = [row(n) for n in range(5)]
    assert admitted(due, {"x": 99}) == due


def test_a_key_admits_its_limit_less_what_runs_in_due_order():
    due = [row(n, "a", 3) for n in range(5)]
    assert admitted(due, {}) == due[:3]
    assert admitted(due, {"a": 2}) == due[:1]
    assert admitted(due, {"a": 3}) == []


def test_each_job_applies_its_own_limit_and_earlier_ones_count_as_started():
    strict, loose, loosest = row(0, "a", 1), row(1, "a", 2), row(2, "a", 4)
    assert admitted([strict, loose, loosest], {"a": 1}) == [loosest]  # places 1, 2, 3 after 1 running
    assert admitted([strict, loose, loosest], {}) == [strict, loose, loosest]
    assert admitted([loose, loosest, strict], {}) == [loose, loosest]  # the strict one is third


def test_running_per_key_counts_keyed_rows_only():
    assert running_per_key([row(0, "a"), row(1, "a"), row(2, "b"), row(3)]) == {"a": 2, "b": 1}


@pytest.mark.parametrize("key", ["a", "reports:acme", "tenant_7.mail-eu", "x" * 200])
def test_good_keys(key):
    assert ConcurrencyLimit(key=key, limit=10_000).to_dict() == {"key": key, "limit": 10_000}


@pytest.mark.parametrize(
    ("key", "limit"),
    [("", 1), ("a::b", 1), (":a", 1), ("a\u00e9", 1), ("x" * 201, 1), (None, 1), ("a", -1), ("a", 1.0)],
)
def test_bad_limits_are_refused(key, limit):
    with pytest.raises(InvalidConcurrency):
        ConcurrencyLimit(key=key, limit=limit)


def test_a_declaration_without_a_limit_keeps_its_digest_and_one_with_a_limit_changes_it():
    plain = Declaration(name="n", kind="cron", topic="t", cron="0 2 * * *")
    assert "concurrency" not in plain.to_dict()  # so upgrading changes no declared schedule
    keyed = Declaration(
        name="n", kind="cron", topic="t", cron="0 2 * * *", concurrency=ConcurrencyLimit(key="k", limit=1)
    )
    assert keyed.fingerprint != plain.fingerprint
    assert keyed.spec(T0).concurrency == ConcurrencyLimit(key="k", limit=1)
