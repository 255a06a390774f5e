"""A worker process for fault tests: fires jobs from SCHEDULE_* settings and appends one line per
event to $SDK_TEST_EVENTS (``job_id occurrence attempt pid``). $SDK_TEST_SLEEP makes each listener
sleep that many seconds first. SIGTERM stops it gracefully; tests also kill it with SIGKILL."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, ScheduleContainer, on_event

EVENTS = os.environ["SDK_TEST_EVENTS"]
SLEEP = float(os.environ.get("SDK_TEST_SLEEP", "0"))


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


def main() -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    container = ScheduleContainer()
    container.listeners().register(record)
    with container.worker():
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        stop.wait()
    container.shutdown_resources()
    return 0


if __name__ == "__main__":
    sys.exit(main())
