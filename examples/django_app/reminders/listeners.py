"""The listener that "sends" a reminder when its job fires; imported by ``RemindersConfig.ready()``."""

from __future__ import annotations

import logging

from django import db

from schedule_sdk import ScheduleArrivedEvent, on_event, schedule_arrived_event_name

from .models import SentReminder

logger = logging.getLogger(__name__)

#: The topic of every reminder job this app schedules.
REMINDER_TOPIC = "reminders.due"


# --8<-- [start:listener]
@on_event(schedule_arrived_event_name(REMINDER_TOPIC))
def send_reminder(event: ScheduleArrivedEvent) -> None:
    """Runs in a worker thread, which has its own database connection: close it when done."""
    payload = event.user_payload or {}
    try:
        _, created = SentReminder.objects.get_or_create(
            dedup_key=event.dedup_key,  # the same across retries and crash replays
            defaults={
                "reminder_id": event.scheduled_job_id,
                "user_id": payload["user_id"],
                "message": payload["message"],
                "due_at": event.scheduled_for,
                "sent_at": event.fired_at,
            },
        )
    finally:
        db.close_old_connections()
    logger.info("reminder %s %s", event.scheduled_job_id, "sent" if created else "already sent")


# --8<-- [end:listener]
