"""The listener that "sends" a reminder when its job fires (``schedule.reminders.due.arrived``)."""

from __future__ import annotations

import logging

from schedule_sdk import ScheduleArrivedEvent, on_event, schedule_arrived_event_name

from .sent import SentReminders

logger = logging.getLogger(__name__)

#: The topic of every reminder job this app schedules.
REMINDER_TOPIC = "reminders.due"


# --8<-- [start:listener]
class ReminderSender:
    """Its dependencies come through the constructor; the container builds it and registers it."""

    def __init__(self, sent: SentReminders) -> None:
        self._sent = sent

    @on_event(schedule_arrived_event_name(REMINDER_TOPIC))
    def send(self, event: ScheduleArrivedEvent) -> None:
        payload = event.user_payload or {}
        first_time = self._sent.record(
            {
                "dedup_key": event.dedup_key,  # the same across retries and crash replays
                "reminder_id": event.scheduled_job_id,
                "user_id": payload["user_id"],
                "message": payload["message"],
                "due_at": event.scheduled_for.isoformat(),
                "sent_at": event.fired_at.isoformat(),
            }
        )
        logger.info("reminder %s %s", event.scheduled_job_id, "sent" if first_time else "already sent")


# --8<-- [end:listener]
