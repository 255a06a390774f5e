"""Quickstart: durable jobs on SQLite, no server needed.

Requires: Python 3.11+.
Install:  python3 -m venv .venv && .venv/bin/pip install -e .
Run:      .venv/bin/python examples/quickstart.py
Expected: a one-shot fires after 1 s (with a per-topic listener), an interval job fires three times
          1.5 s apart, and a minutely cron job (Berlin wall-clock time) fires if its next minute is
          within 8 s, else it is shown and cancelled; each event is printed as it arrives, with its
          lateness, and the script exits by itself within about 10 seconds.
"""

from __future__ import annotations

import os
import tempfile
import threading
from datetime import UTC, datetime, timedelta

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    CronRepeat,
    IntervalRepeat,
    JobMetadata,
    OneShotSpec,
    RepeatSpec,
    ScheduleArrivedEvent,
    ScheduleContainer,
    on_event,
    schedule_arrived_event_name,
)

arrived = threading.Semaphore(0)


@on_event(SCHEDULE_ARRIVED_EVENT)
def print_event(event: ScheduleArrivedEvent) -> None:
    late_ms = (event.fired_at - event.scheduled_for).total_seconds() * 1000
    print(
        f"{event.fired_at:%H:%M:%S.%f} {event.topic:<20} occurrence {event.occurrence} "
        f"(due {event.scheduled_for:%H:%M:%S.%f}, {late_ms:.1f} ms late) payload={event.user_payload}"
    )
    arrived.release()


# --8<-- [start:listener]
@on_event(schedule_arrived_event_name("notifications.task-reminder"))
def send_reminder(event: ScheduleArrivedEvent) -> None:
    print(f"    -> reminding {event.user_payload['userId'] if event.user_payload else '?'}")


# --8<-- [end:listener]


def main() -> None:
    database = os.environ.get("SCHEDULE_DATABASE_URL") or f"sqlite:///{tempfile.mkdtemp()}/quickstart.db"
    # --8<-- [start:container]
    container = ScheduleContainer()
    container.config.from_dict({"database_url": database, "listener_modules": [__name__]})
    service = container.schedule_service()
    # --8<-- [end:container]
    now = datetime.now(UTC)

    # --8<-- [start:schedule]
    with container.worker():  # boot reconciler, then fire jobs in this process
        service.schedule_at(
            OneShotSpec(
                topic="notifications.task-reminder",
                run_at=now + timedelta(seconds=1),
                timezone="America/Mexico_City",
                payload={"userId": "u-42", "message": "Your task is due soon"},
                metadata=JobMetadata(owner_id="u-42"),
            )
        )
        service.schedule_repeat(
            RepeatSpec(topic="demo.interval", timezone="UTC", repeat=IntervalRepeat(every_ms=1500), limit=3)
        )
        # --8<-- [end:schedule]
        cron = service.schedule_repeat(
            RepeatSpec(
                topic="demo.cron",
                timezone="Europe/Berlin",
                repeat=CronRepeat(expression="* * * * *"),  # every minute, in Berlin wall-clock time
                limit=1,
            )
        )
        print(f"scheduled; the cron job is due at {cron.run_at:%H:%M:%S} UTC")
        expected = 1 + 3 + (1 if cron.run_at - now <= timedelta(seconds=8) else 0)
        for _ in range(expected):
            if not arrived.acquire(timeout=15):
                raise SystemExit("an event did not arrive in time")
        if expected == 4:
            service.cancel(cron.id)  # not due soon enough for a quick demo
            print("cancelled the cron job (next minute is more than 8 s away)")
    container.shutdown_resources()
    print("done")


if __name__ == "__main__":
    main()
