"""The retention purger (schedule_sdk/core/retention.py): finished jobs, then the fire history, in
batches, within each tick's budget (on the in-memory store; the SQL stores' purges are in the
contract suites)."""

from __future__ import annotations

from datetime import timedelta

from schedule_sdk.adapters.memory import MemoryJobStore
from schedule_sdk.core.retention import Purger
from schedule_sdk.domain.jobs import JobQuery
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.testing import FakeClock
from schedule_sdk.testing.contracts.rows import FIRED_JOB_ID, NOW, at, fire, insert, job, record

DAY = timedelta(days=1)


def filled(old_jobs: int, old_fires: int) -> MemoryJobStore:
    """Finished jobs and fires two days old, and one recent of each."""
    store = MemoryJobStore()
    finished = [job(status=JobStatus.COMPLETED, updated_at=at(-2 * 86_400 + i)) for i in range(old_jobs)]
    insert(store, *finished, job(status=JobStatus.COMPLETED, updated_at=at(-60)))
    record(store, *(fire(-2 * 86_400 + n, occurrence=n) for n in range(old_fires)), fire(-60, occurrence=999))
    return store


def history(store: MemoryJobStore) -> list[int]:
    return [f.occurrence for f in store.history(FIRED_JOB_ID, 1000)]


def test_a_tick_purges_finished_jobs_then_the_fire_history_then_rests() -> None:
    store = filled(old_jobs=3, old_fires=5)
    purger = Purger(store=store, clock=FakeClock(NOW), retention=DAY, batch_size=2, duty=1.0)
    batches: list[int] = []
    purger.on_purged = batches.append
    assert purger.tick() == 8
    assert batches == [2, 1, 2, 2, 1]  # jobs 2 + 1, then fires 2 + 2 + 1
    assert history(store) == [999]
    assert len(store.list_jobs(JobQuery(limit=100))) == 1  # the recent one
    record(store, fire(-2 * 86_400, occurrence=7))
    assert purger.tick() == 0  # resting until the interval has passed
    assert history(store) == [999, 7]


def test_a_tick_that_runs_out_of_budget_on_jobs_goes_on_at_the_next_tick() -> None:
    store = filled(old_jobs=5, old_fires=3)
    purger = Purger(store=store, clock=FakeClock(NOW), retention=DAY, batch_size=1, tick_budget=0.0, duty=1.0)
    assert purger.tick() == 0  # no time at all: nothing deleted, and no rest either
    purger._budget = 60.0
    assert purger.tick() == 8
    assert history(store) == [999]


def test_without_retention_a_tick_deletes_nothing() -> None:
    store = filled(old_jobs=1, old_fires=1)
    assert Purger(store=store, clock=FakeClock(NOW), retention=None).tick() == 0
    assert history(store) == [999, 0]


def test_purge_history_runs_to_the_end_with_progress_and_keeps_recent_fires() -> None:
    store = filled(old_jobs=0, old_fires=5)
    purger = Purger(store=store, clock=FakeClock(NOW), retention=None, batch_size=2, duty=1.0)
    seen: list[int] = []
    assert purger.purge_history(DAY, progress=seen.append) == 5
    assert seen == [2, 4, 5]
    assert history(store) == [999]
    assert purger.purge_history(DAY, progress=seen.append) == 0
    assert seen == [2, 4, 5, 0]
