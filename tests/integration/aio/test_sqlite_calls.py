"""The awaitable service on SQLite: a call runs inline on the loop when nothing can make it wait,
and on a store thread, with the loop free, while this process or another holds the write lock."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from schedule_sdk import OneShotSpec, ScheduleContainer
from schedule_sdk.aio.blocking import BlockingCalls
from schedule_sdk.aio.sqlite_calls import SQLiteCalls

LOOP_THREAD = "MainThread"


@pytest.fixture
def container(tmp_path: Path) -> Iterator[ScheduleContainer]:
    container = ScheduleContainer()
    container.config.from_dict({"database_url": f"sqlite:///{tmp_path}/jobs.db"})
    yield container
    container.shutdown_resources()


def spec(topic: str = "t.inline") -> OneShotSpec:
    return OneShotSpec(topic=topic, run_at=datetime.now(UTC) + timedelta(hours=1), timezone="UTC")


def count_jobs(container: ScheduleContainer, topic: str) -> int:
    with container.engine().connect() as conn:
        query = sa.text("SELECT count(*) FROM schedule_jobs WHERE topic = :t")
        return int(conn.execute(query, {"t": topic}).scalar_one())


async def ticks_while(awaitable: asyncio.Future[object] | asyncio.Task[object]) -> int:
    """How many times a 10 ms ticker ran on the loop while ``awaitable`` was pending."""
    ticks = 0
    while not awaitable.done():
        await asyncio.sleep(0.01)
        ticks += 1
    return ticks


def test_an_uncontended_call_runs_inline_on_the_loop(container: ScheduleContainer) -> None:
    calls: SQLiteCalls = container.sqlite_calls()

    async def where() -> str:
        return await calls.run(lambda service: threading.current_thread().name)

    assert asyncio.run(where()) == LOOP_THREAD


def test_a_large_call_and_the_rq_substrate_never_run_inline(container: ScheduleContainer) -> None:
    calls: SQLiteCalls = container.sqlite_calls()
    not_inline = SQLiteCalls(service=container.schedule_service(), store=container.store(), inline=False)

    async def where() -> tuple[str, str]:
        large = await calls.run(lambda service: threading.current_thread().name, inline=False)
        rq = await not_inline.run(lambda service: threading.current_thread().name)
        return large, rq

    try:
        large, rq = asyncio.run(where())
    finally:
        not_inline.close()
    assert large.startswith("schedule-sdk-store") and rq.startswith("schedule-sdk-store")


def test_while_this_process_writes_the_call_waits_on_a_thread_and_the_loop_runs(
    container: ScheduleContainer,
) -> None:
    service = container.async_schedule_service()
    store = container.store()
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with store.lock_writes():  # another thread of this process is writing
            held.set()
            release.wait(5)

    thread = threading.Thread(target=writer)
    thread.start()
    held.wait(5)

    async def scenario() -> int:
        task = asyncio.ensure_future(service.schedule_at(spec("t.waits")))
        asyncio.get_running_loop().call_later(0.3, release.set)
        ticks = await ticks_while(task)
        await task
        return ticks

    ticks = asyncio.run(scenario())
    thread.join()
    assert ticks >= 10  # the loop kept running for the 0.3 s the writer held the lock
    assert count_jobs(container, "t.waits") == 1


def test_another_process_holding_sqlites_write_lock_never_blocks_the_loop(
    container: ScheduleContainer, tmp_path: Path
) -> None:
    service = container.async_schedule_service()
    asyncio.run(service.get_by_id("warm-up"))  # migrated, inline connection open
    script = (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(tmp_path / 'jobs.db')!r}, isolation_level=None)\n"
        "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True)\n"
        "time.sleep(0.5); c.execute('COMMIT')\n"
    )
    locker = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"

    async def scenario() -> tuple[int, float]:
        started = time.monotonic()
        task = asyncio.ensure_future(service.schedule_at(spec("t.busy")))
        ticks = await ticks_while(task)
        await task
        return ticks, time.monotonic() - started

    ticks, waited = asyncio.run(scenario())
    assert locker.wait(10) == 0
    assert waited >= 0.2  # it did wait for the other process's lock ...
    assert ticks >= 10  # ... on a thread: the loop kept running
    assert count_jobs(container, "t.busy") == 1  # retried on the thread once, written once


def test_blocking_calls_hand_back_results_and_errors_and_log_posted_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = BlockingCalls(2)

    def boom() -> None:
        raise ValueError("boom")

    async def scenario() -> str:
        with pytest.raises(ValueError, match="boom"):
            await calls.run(boom)
        cancelled = asyncio.ensure_future(calls.run(lambda: time.sleep(0.1)))
        await asyncio.sleep(0)
        cancelled.cancel()  # the call still finishes on its thread; the threads keep serving
        return await calls.run(lambda: threading.current_thread().name)

    try:
        assert asyncio.run(scenario()).startswith("schedule-sdk-store")
        with caplog.at_level(logging.WARNING, logger="schedule_sdk.aio.blocking"):
            calls.post(boom)
            calls.close()  # the posted call runs before the threads stop
    finally:
        calls.close()
    assert "background store call failed" in caplog.text
