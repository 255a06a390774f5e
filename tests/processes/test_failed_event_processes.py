"""A give-up's ``schedule.failed`` event survives the death of the worker delivering it: the
give-up wrote its notice row in the transaction that recorded the failure, and another worker
process delivers the event once the dead one's claim expires."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import Backoff, JobStatus, OneShotSpec, RetryPolicy
from tests.support.waiting import wait_until
from tests.support.worker_process import WorkerProcess


def _deliveries(path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
def test_a_worker_killed_while_delivering_schedule_failed_leaves_it_to_another(backend, tmp_path):
    events, failed = tmp_path / "events.log", tmp_path / "failed.log"
    h = backend.harness(lease_seconds=1.5)
    retry = RetryPolicy(attempts=2, backoff=Backoff(type="fixed", delay_ms=50))
    service = h.service  # built (the store migrated) before the due instant is taken
    run_at = datetime.now(UTC) + timedelta(milliseconds=500)
    job = service.schedule_at(OneShotSpec(topic="faults.job", run_at=run_at, timezone="UTC", retry=retry))
    settings = {"lease_seconds": 1.5, "SDK_TEST_FAIL_ATTEMPTS": 99, "SDK_TEST_FAILED": failed}
    victim = WorkerProcess(backend, events, SDK_TEST_FAILED_KILL=1, **settings)
    assert wait_until(lambda: victim.proc.poll() is not None, 30), victim.log()  # killed itself
    assert h.job(job.id).status is JobStatus.FAILED  # the give-up was recorded before the event
    ((job_id, kind, attempt, pid),) = _deliveries(failed)
    assert (job_id, kind, attempt, int(pid)) == (job.id, "builtins.RuntimeError", "2", victim.proc.pid)
    survivor = WorkerProcess(backend, events, **settings)
    try:
        assert wait_until(lambda: len(_deliveries(failed)) >= 2, 30), survivor.log()
    finally:
        assert survivor.terminate() == 0
    delivered = Counter((d[0], d[2]) for d in _deliveries(failed))
    assert delivered == {(job.id, "2"): 2}  # at least once: again after the kill, not lost
    (again,) = [d for d in _deliveries(failed) if int(d[3]) != victim.proc.pid]
    assert again[:3] == [job.id, "builtins.RuntimeError", "2"]
