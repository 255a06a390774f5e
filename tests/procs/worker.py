"""A worker process for fault tests: fires jobs from SCHEDULE_* settings and appends one line per
event to $SDK_TEST_EVENTS (``job_id occurrence attempt pid``). $SDK_TEST_SLEEP makes each listener
sleep that many seconds first; $SDK_TEST_FAIL_ATTEMPTS makes it raise for attempts up to that
number (after recording the event); $SDK_TEST_CRASH_AT kills the process at that point of the rq
hand-offs (tests/procs/crash.py). With $SDK_TEST_TIMES set, each line also has the listener's
enter and exit times and the event's ``scheduled_for`` (epoch seconds); with $SDK_TEST_MISSED, each
``schedule.missed`` event appends ``job_id reason count`` to that file; with $SDK_TEST_FAILED, each
``schedule.failed`` event appends ``job_id error_type attempt pid`` to that file, and with
$SDK_TEST_FAILED_KILL too the process then kills itself (SIGKILL) before the listener returns;
$SDK_TEST_LOG_INFO logs
at INFO level (with times and thread names) to standard error. With $SDK_TEST_OBSERVE set
(PostgreSQL only), each fire is also inserted into the table ``observed_fires`` of the store's
database, stamped by the database's own clock (``clock_timestamp()``): an observer whose clock is
not this process's, which may be shifted (libfaketime). SIGTERM stops it gracefully; tests also
kill it with SIGKILL."""

from __future__ import annotations

import faulthandler
import os
import select
import signal
import socket
import sys
import threading
import time

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    SCHEDULE_FAILED_EVENT,
    SCHEDULE_MISSED_EVENT,
    ScheduleContainer,
    on_event,
)
from schedule_sdk.entrypoints.stopping import StopSignals
from tests.procs import crash

EVENTS = os.environ["SDK_TEST_EVENTS"]
SLEEP = float(os.environ.get("SDK_TEST_SLEEP", "0"))
FAIL_ATTEMPTS = int(os.environ.get("SDK_TEST_FAIL_ATTEMPTS", "0"))
TIMES = bool(os.environ.get("SDK_TEST_TIMES"))
MISSED = os.environ.get("SDK_TEST_MISSED")
FAILED = os.environ.get("SDK_TEST_FAILED")
FAILED_KILL = bool(os.environ.get("SDK_TEST_FAILED_KILL"))
OBSERVE = bool(os.environ.get("SDK_TEST_OBSERVE"))
_observer_lock = threading.Lock()
_observer: list[object] = []  # one connection per process (the database is shared)


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def observe(event) -> None:
    """Insert the fire into ``observed_fires``, stamped by the database's clock."""
    import psycopg

    with _observer_lock:
        if not _observer:
            _observer.append(
                psycopg.connect(os.environ["SCHEDULE_DATABASE_URL"].replace("+psycopg", ""), autocommit=True)
            )
        conn = _observer[0]
        conn.execute(
            "INSERT INTO observed_fires (job_id, occurrence, attempt, worker, host)"
            " VALUES (%s, %s, %s, %s, %s)",
            (
                event.scheduled_job_id,
                event.occurrence,
                event.attempt,
                os.environ.get("SCHEDULE_WORKER_ID", ""),
                socket.gethostname(),
            ),
        )


@on_event(SCHEDULE_ARRIVED_EVENT)
def record(event) -> None:
    entered = time.time()
    if OBSERVE:
        observe(event)
    if SLEEP:
        time.sleep(SLEEP)
    line = f"{event.scheduled_job_id} {event.occurrence} {event.attempt} {os.getpid()}"
    if TIMES:
        line += f" {entered:.6f} {time.time():.6f} {event.scheduled_for.timestamp():.6f}"
    _append(EVENTS, line + "\n")
    if event.attempt <= FAIL_ATTEMPTS:
        raise RuntimeError(f"attempt {event.attempt} fails on purpose")


def record_missed(event) -> None:
    assert MISSED is not None
    _append(MISSED, f"{event.scheduled_job_id} {event.reason} {event.count}\n")


def record_failed(event) -> None:
    assert FAILED is not None
    _append(FAILED, f"{event.scheduled_job_id} {event.error_type} {event.attempt} {os.getpid()}\n")
    if FAILED_KILL:  # dies mid-delivery: the event must reach a listener again, elsewhere
        os.kill(os.getpid(), signal.SIGKILL)


def sleep_relative(seconds: float) -> None:
    """``time.sleep`` by a relative wait: under libfaketime (0.9.10, Debian 12) Python's sleep, an
    absolute ``clock_nanosleep``, fails with EINVAL; ``select`` waits are relative and unaffected."""
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)


def main() -> int:
    if os.environ.get("SDK_TEST_LOG_INFO"):  # a timeline for a test to show when it fails
        import logging

        fmt = "%(asctime)s.%(msecs)03d %(threadName)s %(name)s %(levelname)s %(message)s"
        logging.basicConfig(level=logging.INFO, format=fmt, datefmt="%H:%M:%S")
    if "FAKETIME" in os.environ:  # this process's clock is shifted (tests/support/worker_process.py)
        time.sleep = sleep_relative
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # every thread's stack, to stderr
    container = ScheduleContainer()
    container.listeners().register(record)
    if MISSED:
        container.listeners().connect(SCHEDULE_MISSED_EVENT, record_missed)
    if FAILED:
        container.listeners().connect(SCHEDULE_FAILED_EVENT, record_failed)
    if "SDK_TEST_CRASH_AT" in os.environ:
        crash.install(os.environ["SDK_TEST_CRASH_AT"], container)
    with StopSignals((signal.SIGTERM,)) as stop, container.worker():
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        stop.wait()
    container.shutdown_resources()
    return 0


if __name__ == "__main__":
    sys.exit(main())
