"""Async HTTP endpoints: schedule, list, reschedule and cancel reminders through an injected
AsyncScheduleService; a reminder's job and the app's own row are written in one transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import sqlalchemy as sa
from dependency_injector.wiring import Provide, inject
from fastapi import APIRouter, Depends, HTTPException, Query, Response
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncEngine

from schedule_sdk import (
    AsyncScheduleService,
    CronRepeat,
    JobMetadata,
    JobNotFound,
    OneShotSpec,
    RepeatSpec,
    ScheduledJob,
)

from .containers import Container
from .listeners import REMINDER_TOPIC
from .schedules import Digest
from .sent import SentReminders, reminders

router = APIRouter()

# `from __future__ import annotations` turns annotations into strings, so the markers go in defaults.
# --8<-- [start:inject]
SERVICE = Depends(Provide[Container.schedule.async_schedule_service])
ENGINE = Depends(Provide[Container.schedule.async_engine])  # the same database as the SDK's tables
# --8<-- [end:inject]
SENT = Depends(Provide[Container.sent_reminders])
DIGEST = Depends(Provide[Container.digest])


class NewReminder(BaseModel):
    user_id: str
    message: str
    due_at: datetime  # ISO 8601 with an offset; a naive time is refused with SCHEDULE_NAIVE_DATETIME
    timezone: str = "UTC"  # the user's IANA zone, echoed back in every event
    client_request_id: str | None = None  # makes a retried POST safe: a duplicate gets 409


class NewRecurringReminder(BaseModel):
    user_id: str
    message: str
    cron: str  # five fields, e.g. "0 9 * * 1-5"; a bad one is refused with SCHEDULE_INVALID_CRON
    timezone: str  # the cron runs in this IANA zone: 09:00 stays 09:00 across DST changes


class NewTime(BaseModel):
    due_at: datetime
    timezone: str | None = None


class Reminder(BaseModel):
    id: str
    user_id: str
    message: str
    due_at: datetime
    timezone: str
    status: str
    rescheduled_from: str | None = None
    cron: str | None = None  # a recurring reminder's expression (``due_at`` is its next fire)

    @classmethod
    def of(cls, job: ScheduledJob) -> Reminder:
        payload = job.payload or {}
        return cls(
            id=job.id,
            user_id=payload["user_id"],
            message=payload["message"],
            due_at=job.run_at,
            timezone=job.timezone,
            status=job.status.value,
            rescheduled_from=job.rescheduled_from,
            cron=job.repeat.expression if isinstance(job.repeat, CronRepeat) else None,
        )


class ReminderPage(BaseModel):
    items: list[Reminder]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last")


# --8<-- [start:create]
@router.post("/reminders", status_code=201)
@inject
async def create_reminder(
    body: NewReminder, service: AsyncScheduleService = SERVICE, engine: AsyncEngine = ENGINE
) -> Reminder:
    spec = OneShotSpec(
        topic=REMINDER_TOPIC,
        run_at=body.due_at,
        timezone=body.timezone,
        payload={"user_id": body.user_id, "message": body.message},
        metadata=JobMetadata(owner_id=body.user_id, client_request_id=body.client_request_id),
    )
    try:
        async with engine.begin() as conn:  # one transaction: the job and the app's row, or neither
            job = await service.schedule_at(spec, connection=conn)
            row = {"job_id": job.id, "user_id": body.user_id, "message": body.message}
            row["due_at"] = job.run_at.isoformat()
            await conn.execute(reminders.insert().values(**row))
    except sa.exc.IntegrityError as error:  # rolled back: the job above never existed
        detail = {"code": "REMINDER_EXISTS", "message": "this user already has this reminder at this time"}
        raise HTTPException(status_code=409, detail=detail) from error
    return Reminder.of(job)


# --8<-- [end:create]


@router.post("/reminders/recurring", status_code=201)
@inject
async def create_recurring_reminder(
    body: NewRecurringReminder, service: AsyncScheduleService = SERVICE
) -> Reminder:
    """A reminder on a cron schedule in the user's zone (``schedule_repeat``)."""
    spec = RepeatSpec(
        topic=REMINDER_TOPIC,
        repeat=CronRepeat(expression=body.cron),
        timezone=body.timezone,
        payload={"user_id": body.user_id, "message": body.message},
        metadata=JobMetadata(owner_id=body.user_id),
    )
    return Reminder.of(await service.schedule_repeat(spec))


@router.get("/reminders")
@inject
async def list_reminders(
    owner: str | None = None,
    status: Annotated[list[str] | None, Query()] = None,
    limit: int = 20,
    cursor: str | None = None,
    service: AsyncScheduleService = SERVICE,
) -> ReminderPage:
    page = await service.list(owner_id=owner, topic=REMINDER_TOPIC, status=status, limit=limit, cursor=cursor)
    return ReminderPage(items=[Reminder.of(job) for job in page.items], next_cursor=page.next_cursor)


@router.get("/reminders/{reminder_id}")
@inject
async def get_reminder(reminder_id: str, service: AsyncScheduleService = SERVICE) -> Reminder:
    job = await service.get_by_id(reminder_id)
    if job is None or job.topic != REMINDER_TOPIC:
        raise JobNotFound(reminder_id)
    return Reminder.of(job)


@router.post("/reminders/{reminder_id}/reschedule")
@inject
async def reschedule_reminder(
    reminder_id: str, body: NewTime, service: AsyncScheduleService = SERVICE
) -> Reminder:
    """Replaces the reminder: the answer has a new id (``rescheduled_from`` is the old one)."""
    old = await service.get_by_id(reminder_id)
    if old is None or old.topic != REMINDER_TOPIC:
        raise JobNotFound(reminder_id)
    spec = OneShotSpec(
        topic=REMINDER_TOPIC,
        run_at=body.due_at,
        timezone=body.timezone or old.timezone,
        payload=old.payload,
        metadata=JobMetadata(owner_id=old.metadata.owner_id),
    )
    return Reminder.of(await service.reschedule(reminder_id, spec))


@router.delete("/reminders/{reminder_id}", status_code=204)
@inject
async def cancel_reminder(reminder_id: str, service: AsyncScheduleService = SERVICE) -> Response:
    await service.cancel(reminder_id)  # idempotent; JobNotFound becomes 404
    return Response(status_code=204)


@router.get("/sent")
@inject
def sent_reminders(sent: SentReminders = SENT) -> list[dict[str, Any]]:
    """What the listener has sent (a real app would have e-mailed it instead)."""
    return sent.all()


@router.get("/digests")
@inject
def digests(digest: Digest = DIGEST) -> list[dict[str, Any]]:
    """The digests the declared schedule made in this process."""
    return digest.runs


@router.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}
