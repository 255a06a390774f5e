"""The app of bench/crash_trial.py: a worker (``container.worker()``) and, unless $CRASH_QUIET is
set, a loop that schedules one-shots due 0.2-2 s ahead and cancels about one in five right away.
It appends to $CRASH_LOG, one ``write`` per line: ``S <id> <due>`` once ``schedule_at`` returned,
``C <id> <t>`` once ``cancel`` returned, ``F <id> <fired_at>`` per fire (epoch seconds). The trial
kills it with SIGKILL at a random moment; SIGTERM stops it cleanly."""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from datetime import UTC, datetime, timedelta

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    OneShotSpec,
    ScheduleArrivedEvent,
    ScheduleContainer,
    on_event,
)
from schedule_sdk.entrypoints.stopping import StopSignals

_fd = os.open(os.environ["CRASH_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def log(line: str) -> None:
    os.write(_fd, (line + "\n").encode())


@on_event(SCHEDULE_ARRIVED_EVENT)
def fired(event: ScheduleArrivedEvent) -> None:
    log(f"F {event.scheduled_job_id} {event.fired_at.timestamp()}")


def main() -> int:
    container = ScheduleContainer()
    service = container.schedule_service()
    with StopSignals((signal.SIGTERM,)) as stop, container.worker():
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while not os.environ.get("CRASH_QUIET") and not stop.wait(0.01):
            due = datetime.now(UTC) + timedelta(seconds=random.uniform(0.2, 2.0))
            job = service.schedule_at(OneShotSpec(topic="crash", run_at=due, timezone="UTC"))
            log(f"S {job.id} {due.timestamp()}")
            if random.random() < 0.2:
                service.cancel(job.id)
                log(f"C {job.id} {time.time()}")
        stop.wait()
    container.shutdown_resources()
    return 0


if __name__ == "__main__":
    sys.exit(main())
