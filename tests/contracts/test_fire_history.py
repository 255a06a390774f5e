"""The JobStore contract for fire history (ports.py: record_fires, history, purge_history), on
every store: entries commit and roll back with the transaction that writes them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta, timezone

import pytest

from schedule_sdk.domain.history import FireOutcome, FireRecord
from schedule_sdk.ports import JobStore

from .jobs import NOW, at

PLUS_2 = timezone(timedelta(hours=2))


def fire(job_id: str = "01900000-0000-7000-8000-00000000000a", seconds: float = 0, **changes) -> FireRecord:
    values = {
        "job_id": job_id,
        "topic": "contract.test",
        "occurrence": 1,
        "attempt": 1,
        "due_at": at(seconds),
        "fired_at": at(seconds + 0.25),
        "lateness_ms": 250,
        "duration_ms": 12,
        "outcome": FireOutcome.SUCCEEDED,
        "error": None,
        "worker_id": "host:1:abcdefgh",
    }
    values.update(changes)
    return FireRecord(**values)


def record(store: JobStore, *fires: FireRecord) -> None:
    with store.transaction() as tx:
        tx.record_fires(list(fires))


def test_a_recorded_fire_reads_back_field_for_field(job_store: JobStore, reopen: Callable[[], JobStore]):
    failed = fire(
        occurrence=3,
        attempt=2,
        due_at=NOW.astimezone(PLUS_2),
        fired_at=(NOW + timedelta(microseconds=7)).astimezone(PLUS_2),
        lateness_ms=0,
        outcome=FireOutcome.FAILED,
        error="RuntimeError: <script>é</script>",
    )
    record(job_store, failed)
    [back] = reopen().history(failed.job_id, 10)
    assert back == failed  # frozen dataclass equality; aware datetimes compare as instants
    assert back.fired_at.utcoffset() == timedelta(0) and back.outcome is FireOutcome.FAILED


def test_history_is_one_jobs_newest_first_limited_and_paged(job_store: JobStore):
    mine = [fire(seconds=s, occurrence=s + 1) for s in range(5)]
    record(job_store, *mine[:2], fire(job_id="01900000-0000-7000-8000-00000000000b"))
    record(job_store, *mine[2:])
    page = job_store.history(mine[0].job_id, 3)
    assert [f.occurrence for f in page] == [5, 4, 3]
    rest = job_store.history(mine[0].job_id, 3, before=page[-1].fired_at)
    assert [f.occurrence for f in rest] == [2, 1]
    assert job_store.history("01900000-0000-7000-8000-00000000000c", 3) == []


def test_fires_roll_back_with_their_transaction(job_store: JobStore):
    with pytest.raises(RuntimeError), job_store.transaction() as tx:
        tx.record_fires([fire()])
        raise RuntimeError("abort")
    assert job_store.history(fire().job_id, 10) == []


def test_purge_history_deletes_old_entries_oldest_first_up_to_the_limit(job_store: JobStore):
    record(job_store, *(fire(seconds=s, occurrence=s + 1) for s in range(6)))
    assert job_store.purge_history(at(3), 2) == 2  # fired at +0.25 and +1.25
    assert [f.occurrence for f in job_store.history(fire().job_id, 10)] == [6, 5, 4, 3]
    assert job_store.purge_history(at(3), 10) == 1  # +2.25; +3.25 is not before +3
    assert job_store.purge_history(at(3), 10) == 0
    assert [f.occurrence for f in job_store.history(fire().job_id, 10)] == [6, 5, 4]
