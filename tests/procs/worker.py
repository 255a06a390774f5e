"""A worker process for fault tests: fires jobs from SCHEDULE_* settings and appends one line per
event to $SDK_TEST_EVENTS (``job_id occurrence attempt pid``). $SDK_TEST_SLEEP makes each listener
sleep that many seconds first; $SDK_TEST_FAIL_ATTEMPTS makes it raise for attempts up to that
number (after recording the event); $SDK_TEST_CRASH_AT kills the process at that point of the rq
hand-offs (tests/procs/crash.py). SIGTERM stops it gracefully; tests also kill it with SIGKILL."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, ScheduleContainer, on_event
from tests.procs import crash

EVENTS = os.environ["SDK_TEST_EVENTS"]
SLEEP = float(os.environ.get("SDK_TEST_SLEEP", "0"))
FAIL_ATTEMPTS = int(os.environ.get("SDK_TEST_FAIL_ATTEMPTS", "0"))


@on_event(SCHEDULE_ARRIVED_EVENT)
def record(event) -> None:
    if SLEEP:
        time.sleep(SLEEP)
    line = f"{event.scheduled_job_id} {event.occurrence} {event.attempt} {os.getpid()}\n"
    fd = os.open(EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    if event.attempt <= FAIL_ATTEMPTS:
        raise RuntimeError(f"attempt {event.attempt} fails on purpose")


def main() -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    container = ScheduleContainer()
    container.listeners().register(record)
    if "SDK_TEST_CRASH_AT" in os.environ:
        crash.install(os.environ["SDK_TEST_CRASH_AT"], container)
    with container.worker():
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        stop.wait()
    container.shutdown_resources()
    return 0


if __name__ == "__main__":
    sys.exit(main())
