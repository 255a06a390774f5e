"""The app's container: the SDK's ``ScheduleContainer`` plus the app's own providers."""

from __future__ import annotations

import httpx
from dependency_injector import containers, providers

from schedule_sdk import ScheduleContainer

from .listeners import ReminderSender
from .schedules import Digest
from .sent import SentReminders, create_engine


# --8<-- [start:container]
class Container(containers.DeclarativeContainer):
    wiring_config = containers.WiringConfiguration(modules=[".endpoints"])

    config = providers.Configuration()
    # Every key under config.schedule is a schedule_sdk setting; unset ones come from SCHEDULE_* variables.
    schedule = providers.Container(ScheduleContainer, config=config.schedule)

    engine = providers.Resource(create_engine, url=schedule.settings.provided.database_url)
    sent_reminders = providers.Singleton(SentReminders, engine=engine)
    # One async HTTP client for the whole app (closed by the lifespan); the listener uses it.
    http_client = providers.Singleton(httpx.AsyncClient, timeout=10)
    reminder_sender = providers.Singleton(
        ReminderSender, sent=sent_reminders, http=http_client, webhook_url=config.webhook_url
    )
    # The class whose method is a declared schedule (see schedules.py).
    digest = providers.Singleton(Digest, sent=sent_reminders)


# --8<-- [end:container]
