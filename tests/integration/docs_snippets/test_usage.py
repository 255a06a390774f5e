"""The usage examples shown in README.md and docs/, run as tests (the docs include these sections)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

# --8<-- [start:imports]
from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    Backoff,
    CronRepeat,
    IntervalRepeat,
    JobMetadata,
    JobNotFound,
    OneShotSpec,
    RepeatSpec,
    RetryPolicy,
    ScheduleArrivedEvent,
    ScheduleContainer,
    ScheduleError,
    ScheduleService,
    on_event,
    schedule_arrived_event_name,
)

# --8<-- [end:imports]

received: list[ScheduleArrivedEvent] = []
arrived = threading.Event()


# --8<-- [start:listeners]
@on_event(SCHEDULE_ARRIVED_EVENT)  # every fire of every job
def audit(event: ScheduleArrivedEvent) -> None:
    print(f"{event.topic} fired for {event.scheduled_for.isoformat()} (attempt {event.attempt})")


@on_event(schedule_arrived_event_name("notifications.task-reminder"))  # one topic only
def send_reminder(event: ScheduleArrivedEvent) -> None:
    # At least once: (scheduled_job_id, occurrence) is a stable de-duplication key.
    user_id = event.user_payload["userId"] if event.user_payload else None
    received.append(event)
    arrived.set()
    print(f"remind {user_id} (job {event.scheduled_job_id}, occurrence {event.occurrence})")


# --8<-- [end:listeners]


class ReminderListener:
    # --8<-- [start:method-listener]
    @on_event(schedule_arrived_event_name("billing.invoice-due"))
    async def on_invoice_due(self, event: ScheduleArrivedEvent) -> None:  # async listeners work too
        ...

    # --8<-- [end:method-listener]


invoice_listener = ReminderListener()


# --8<-- [start:reminder-service]
class ReminderService:
    """App code: receives the ScheduleService by constructor injection."""

    def __init__(self, schedule_service: ScheduleService) -> None:
        self._schedules = schedule_service

    def remind(self, user_id: str, run_at: datetime) -> str:
        job = self._schedules.schedule_at(
            OneShotSpec(
                topic="notifications.task-reminder",
                run_at=run_at,  # an aware datetime; naive ones are refused
                timezone="America/Mexico_City",  # IANA name, echoed in the event
                payload={"userId": user_id, "message": "Your task is due soon"},
                metadata=JobMetadata(owner_id=user_id),
                retry=RetryPolicy(attempts=3, backoff=Backoff(type="fixed", delay_ms=5_000)),
            )
        )
        return job.id


# --8<-- [end:reminder-service]


def test_readme_example(tmp_path):
    url = f"sqlite:///{tmp_path}/jobs.db"
    received.clear()
    arrived.clear()
    # --8<-- [start:container]
    container = ScheduleContainer()
    container.config.from_dict(
        {
            "database_url": url,
            "listener_modules": [__name__],
        }  # or SCHEDULE_DATABASE_URL, ..._LISTENER_MODULES
    )
    container.listeners().register(invoice_listener)  # objects with @on_event methods
    reminders = ReminderService(container.schedule_service())

    with container.worker():  # boot reconciler, then fire jobs in this process
        reminders.remind("u-42", datetime.now(UTC) + timedelta(seconds=1))
        arrived.wait(timeout=10)
    container.shutdown_resources()
    # --8<-- [end:container]
    assert received and received[-1].user_payload == {"userId": "u-42", "message": "Your task is due soon"}
    container.listeners().unregister(invoice_listener)


def test_repeat_cancel_reschedule_list(tmp_path):
    container = ScheduleContainer()
    container.config.from_dict({"database_url": f"sqlite:///{tmp_path}/jobs.db"})
    service = container.schedule_service()
    user_id = "u-7"
    # --8<-- [start:repeat]
    heartbeat = service.schedule_repeat(
        RepeatSpec(
            topic="ai.agent-heartbeat",
            timezone="UTC",
            payload={"agentId": "agent-xyz"},
            # 09:00 on weekdays, Mexico City wall-clock time (DST handled)
            repeat=CronRepeat(expression="0 9 * * 1-5", timezone="America/Mexico_City"),
        )
    )
    poll = service.schedule_repeat(
        RepeatSpec(topic="feeds.poll", timezone="UTC", repeat=IntervalRepeat(every_ms=60_000), limit=10)
    )
    # --8<-- [end:repeat]
    # --8<-- [start:manage]
    service.cancel(poll.id)  # idempotent: cancelling again is fine
    replacement = service.reschedule(  # a new job with a new id; the old one is cancelled
        heartbeat.id,
        RepeatSpec(topic="ai.agent-heartbeat", timezone="UTC", repeat=CronRepeat(expression="*/30 * * * *")),
    )
    job = service.get_by_id(replacement.id)  # None if there is no such job
    page = service.list(owner_id=user_id, status=["pending", "active"], limit=20)
    while page.next_cursor is not None:  # keyset pagination, stable order
        page = service.list(owner_id=user_id, status=["pending", "active"], limit=20, cursor=page.next_cursor)
    # --8<-- [end:manage]
    assert job is not None and job.rescheduled_from == heartbeat.id
    # --8<-- [start:errors]
    try:
        service.cancel("01900000-0000-7000-8000-000000000000")
    except JobNotFound as error:
        assert error.code == "SCHEDULE_NOT_FOUND"
    except ScheduleError as error:  # any other scheduler error, each with a stable .code
        raise RuntimeError(error.code) from error
    # --8<-- [end:errors]
    with pytest.raises(ScheduleError):
        service.reschedule(
            poll.id, RepeatSpec(topic="x", timezone="UTC", repeat=IntervalRepeat(every_ms=1000))
        )
    container.shutdown_resources()
