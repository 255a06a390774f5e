"""The listener that "sends" a reminder when its job fires (``schedule.reminders.due.arrived``)."""

from __future__ import annotations

import asyncio
import logging

import httpx

from schedule_sdk import ScheduleArrivedEvent, on_event, schedule_arrived_event_name

from .sent import SentReminders

logger = logging.getLogger(__name__)

#: The topic of every reminder job this app schedules.
REMINDER_TOPIC = "reminders.due"


# --8<-- [start:listener]
class ReminderSender:
    """Its dependencies come through the constructor; the container builds it and registers it.

    ``send`` is ``async def``: the worker, started in the app's lifespan, runs it on the app's own
    event loop, so it can use the app-wide ``httpx.AsyncClient`` (one connection pool for the app).
    """

    def __init__(self, sent: SentReminders, http: httpx.AsyncClient, webhook_url: str | None) -> None:
        self._sent = sent
        self._http = http
        self._webhook_url = webhook_url

    @on_event(schedule_arrived_event_name(REMINDER_TOPIC))
    async def send(self, event: ScheduleArrivedEvent) -> None:
        payload = event.user_payload or {}
        row = {
            "dedup_key": event.dedup_key,  # the same across retries and crash replays
            "reminder_id": event.scheduled_job_id,
            "user_id": payload["user_id"],
            "message": payload["message"],
            "due_at": event.scheduled_for.isoformat(),
            "sent_at": event.fired_at.isoformat(),
        }
        if self._webhook_url:  # a failure raises: the fire is retried (at least once)
            response = await self._http.post(self._webhook_url, json=row)
            response.raise_for_status()
        first_time = await asyncio.to_thread(self._sent.record, row)
        logger.info("reminder %s %s", event.scheduled_job_id, "sent" if first_time else "already sent")


# --8<-- [end:listener]
