"""The app's schedules declared in code: schedule_sdk.contrib.django finds this module (every
installed app's ``schedules`` module) and a worker syncs what it declares when it starts."""

from __future__ import annotations

import logging

from django import db
from django.conf import settings
from django.utils import timezone

from schedule_sdk import ScheduleArrivedEvent, every

from .models import SentReminder

logger = logging.getLogger(__name__)


# --8<-- [start:digest]
@every(settings.REMINDERS_DIGEST_EVERY, name="reminders.digest")
def send_digest(event: ScheduleArrivedEvent) -> None:
    """Once per interval, in a worker thread: log how many reminders went out in the last one."""
    since = timezone.now() - settings.REMINDERS_DIGEST_EVERY
    try:
        sent = SentReminder.objects.filter(sent_at__gte=since).count()
    finally:
        db.close_old_connections()
    logger.info("digest %s: %d reminder(s) sent since %s", event.scheduled_for.isoformat(), sent, since)


# --8<-- [end:digest]
