"""Time limits with real worker processes, on every store x substrate combination: a sync
listener past its limit is recorded as ``timeout`` and retried, its thread stays stuck without
starving the worker (other jobs fire meanwhile; ``health`` says degraded), and its late result
changes nothing; an ``async def`` listener is cancelled at the limit of its topic (a setting).
A stock ``rq worker`` enforces the limit too."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schedule_sdk import Backoff, FireOutcome, OneShotSpec, RetryPolicy
from schedule_sdk.core.health import container_health
from schedule_sdk.ports import WorkerRegistry, require
from tests.conftest import Backend
from tests.harness import Harness
from tests.processes.test_sql_processes import WorkerProcess
from tests.support.rq_fixtures import release_all, run_stock_rq_worker
from tests.support.time_limit_listeners import lines
from tests.support.waiting import wait_for, wait_until

pytestmark = pytest.mark.slow


def spec(topic: str, seconds: float = 0.1, **fields: object) -> OneShotSpec:
    run_at = datetime.now(UTC) + timedelta(seconds=seconds)
    return OneShotSpec(topic=topic, run_at=run_at, timezone="UTC", **fields)  # type: ignore[arg-type]


@pytest.fixture
def limited_worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., WorkerProcess]:
    """Starts tests/procs/worker.py with the time limit listeners (notes in ``tmp_path / "limits"``;
    the file ``tmp_path / "release"`` lets the hung ones return)."""
    monkeypatch.setenv("SDK_TEST_LIMITS", str(tmp_path / "limits"))  # the worker inherits them
    monkeypatch.setenv("SDK_TEST_RELEASE", str(tmp_path / "release"))

    def start(backend: Backend, **settings: object) -> WorkerProcess:
        modules = "tests.support.time_limit_listeners"
        return WorkerProcess(backend, tmp_path / "events", listener_modules=modules, **settings)

    return start


def stuck_of(h: Harness) -> list[int]:
    return [w.stuck for w in require(h.store, WorkerRegistry, "the test").workers()]


def stuck_check(h: Harness) -> tuple[bool, str]:
    [check] = [c for c in container_health(h.container).checks if c.name == "stuck"]
    return check.warning, check.detail


def test_a_sync_listener_past_its_limit_times_out_is_retried_and_never_starves_the_worker(
    backend: Backend, tmp_path: Path, limited_worker: Callable[..., WorkerProcess]
) -> None:
    h = backend.harness()  # no worker in this process: the worker process fires
    notes = tmp_path / "limits"
    # One listener thread: were the stuck one not replaced, nothing else could fire.
    worker = limited_worker(backend, worker_concurrency=1, max_stuck_listeners=4)
    try:
        retry = RetryPolicy(attempts=2, backoff=Backoff(type="fixed", delay_ms=100))
        hung = h.service.schedule_at(spec("limits.hang", time_limit=timedelta(milliseconds=400), retry=retry))
        failed = h.wait_status(hung.id, "failed", timeout=20)
        assert failed.last_error == "ListenerTimedOut: listeners ran past the fire's time limit of 400 ms"
        history = h.service.history(hung.id)
        assert [(f.attempt, f.outcome) for f in history] == [
            (2, FireOutcome.TIMEOUT),
            (1, FireOutcome.TIMEOUT),
        ]
        assert all(f.failed and f.duration_ms >= 400 for f in history)
        # Both attempts' listeners still run; other jobs fire on the worker's one listener thread.
        quick = [h.service.schedule_at(spec("limits.quick", 0.05)).id for _ in range(5)]
        for job_id in quick:
            h.wait_status(job_id, "completed", timeout=20)
        noted = lines(notes)
        assert [(w, a) for w, j, a, _ in noted if j == hung.id] == [("enter", 1), ("enter", 2)]
        assert sorted(j for w, j, _, _ in noted if w == "ran") == sorted(quick)
        # The worker reports its two stuck threads: health says degraded, not down.
        assert wait_until(lambda: stuck_of(h) == [2], 10), stuck_of(h)
        warning, detail = stuck_check(h)
        assert warning and "degraded: 2 listener thread(s) stuck" in detail, detail
        assert container_health(h.container).ok and container_health(h.container).degraded
        # Released, the hung listeners return: their late success changes nothing.
        (tmp_path / "release").touch()
        assert wait_until(lambda: [w for w, j, _, _ in lines(notes) if j == hung.id].count("exit") == 2)
        assert wait_until(lambda: stuck_of(h) == [0], 10), stuck_of(h)
        assert stuck_check(h)[0] is False and not container_health(h.container).degraded
        after = h.job(hung.id)
        assert (after.status.value, after.attempt, after.last_error) == ("failed", 2, failed.last_error)
        assert h.service.history(hung.id) == history
    finally:
        (tmp_path / "release").touch()
        assert worker.terminate() == 0


def test_an_async_listener_is_cancelled_at_its_topics_limit_and_no_thread_is_stuck(
    backend: Backend, tmp_path: Path, limited_worker: Callable[..., WorkerProcess]
) -> None:
    h = backend.harness()
    notes = tmp_path / "limits"
    worker = limited_worker(backend, time_limits="limits.async=0.3,limits.other=5")
    try:
        job = h.service.schedule_at(spec("limits.async"))  # no limit of its own: its topic's
        assert job.time_limit is None
        failed = h.wait_status(job.id, "failed", timeout=20)
        assert failed.last_error is not None and "time limit of 300 ms" in failed.last_error
        [fire] = h.service.history(job.id)
        assert fire.outcome is FireOutcome.TIMEOUT and 300 <= fire.duration_ms < 5000
        assert wait_until(lambda: [w for w, j, _, _ in lines(notes) if j == job.id] == ["enter", "cancelled"])
        # A beat after the timeout still shows no stuck thread: the coroutine was cancelled.
        later = fire.fired_at + timedelta(seconds=1)
        seen = wait_for(
            lambda: [
                w for w in require(h.store, WorkerRegistry, "the test").workers() if w.last_beat > later
            ],
            "a later beat",
        )
        assert [w.stuck for w in seen] == [0]
        assert stuck_check(h)[0] is False
    finally:
        assert worker.terminate() == 0


@pytest.mark.redis
@pytest.mark.parametrize("worker_class", ["rq.worker.SimpleWorker", "rq.worker.Worker"])
def test_a_stock_rq_worker_records_a_timeout_and_goes_on(
    rq_settings, harnesses, tmp_path, worker_class
) -> None:
    notes, release = tmp_path / "limits", tmp_path / "release"
    h = harnesses(rq_settings)
    hung = h.service.schedule_at(spec("limits.hang", 0.2, time_limit=timedelta(milliseconds=300)))
    quick = h.service.schedule_at(spec("limits.quick", 0.3))
    release_all(h, 2)
    try:
        run_stock_rq_worker(
            rq_settings,
            worker_class,
            SCHEDULE_LISTENER_MODULES="tests.support.time_limit_listeners",
            SDK_TEST_LIMITS=str(notes),
            SDK_TEST_RELEASE=str(release),
        )
        assert h.job(hung.id).status.value == "failed"
        [fire] = h.service.history(hung.id)
        assert fire.outcome is FireOutcome.TIMEOUT and fire.error is not None and "300 ms" in fire.error
        assert h.job(quick.id).status.value == "completed"
        assert [(w, j) for w, j, _, _ in lines(notes)] == [("enter", hung.id), ("ran", quick.id)]
    finally:
        release.touch()
