"""The README's example, run as a test (stdout shows the listener ran)."""

from __future__ import annotations

# --8<-- [start:readme]
import time
from datetime import UTC, datetime, timedelta

from schedule_sdk import (
    OneShotSpec,
    ScheduleArrivedEvent,
    ScheduleContainer,
    on_event,
    schedule_arrived_event_name,
)


@on_event(schedule_arrived_event_name("notifications.task-reminder"))
def send_reminder(event: ScheduleArrivedEvent) -> None:  # at least once, never early
    print(f"remind {event.user_payload['userId']}, due {event.scheduled_for:%H:%M:%S} UTC")


# --8<-- [end:readme]


def test_readme_example(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SCHEDULE_DATABASE_URL", f"sqlite:///{tmp_path}/jobs.db")
    # --8<-- [start:readme-use]
    container = ScheduleContainer()  # SQLite by default; SCHEDULE_DATABASE_URL for PostgreSQL
    container.listeners().register(send_reminder)  # or a module, or SCHEDULE_LISTENER_MODULES
    service = container.schedule_service()  # inject this into your code
    with container.worker():  # reconcile, then fire due jobs in this process
        service.schedule_at(
            OneShotSpec(
                topic="notifications.task-reminder",
                run_at=datetime.now(UTC) + timedelta(seconds=1),
                timezone="America/Mexico_City",
                payload={"userId": "u-42"},
            )
        )
        time.sleep(3)  # the worker starts, then fires it at its due instant
    # --8<-- [end:readme-use]
    container.shutdown_resources()
    assert "remind u-42, due" in capsys.readouterr().out
