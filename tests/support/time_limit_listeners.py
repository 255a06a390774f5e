"""Listeners for the time limit tests (``SCHEDULE_LISTENER_MODULES``), in worker processes and
stock ``rq worker`` processes. Each appends ``<what> <job_id> <attempt> <pid>`` lines to
``$SDK_TEST_LIMITS``:

- ``limits.hang`` (sync): ``enter``, then blocks until the file ``$SDK_TEST_RELEASE`` exists (at
  most a minute), then ``exit``: a listener stuck past its time limit, released by the test;
- ``limits.async`` (``async def``): ``enter``, then awaits a minute; ``cancelled`` when it is
  cancelled;
- ``limits.quick`` (sync): ``ran``.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from schedule_sdk import ScheduleArrivedEvent, on_event, schedule_arrived_event_name


def note(what: str, event: ScheduleArrivedEvent) -> None:
    line = f"{what} {event.scheduled_job_id} {event.attempt} {os.getpid()}\n"
    fd = os.open(os.environ["SDK_TEST_LIMITS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@on_event(schedule_arrived_event_name("limits.hang"))
def hang(event: ScheduleArrivedEvent) -> None:
    note("enter", event)
    release = Path(os.environ["SDK_TEST_RELEASE"])
    deadline = time.monotonic() + 60
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    note("exit", event)


@on_event(schedule_arrived_event_name("limits.async"))
async def wait_long(event: ScheduleArrivedEvent) -> None:
    note("enter", event)
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        note("cancelled", event)
        raise


@on_event(schedule_arrived_event_name("limits.quick"))
def quick(event: ScheduleArrivedEvent) -> None:
    note("ran", event)


def lines(path: Path) -> list[tuple[str, str, int, int]]:
    """The notes written so far: ``(what, job_id, attempt, pid)``."""
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return [(r[0], r[1], int(r[2]), int(r[3])) for r in rows]
