"""JSON views: create, list, show, reschedule and cancel reminders through an injected ScheduleService."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from dependency_injector.wiring import Provide, inject
from django import db
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from schedule_sdk import (
    JobMetadata,
    JobNotFound,
    OneShotSpec,
    ScheduleContainer,
    ScheduledJob,
    ScheduleService,
)

from .listeners import REMINDER_TOPIC
from .models import Reminder, SentReminder


class BadRequest(Exception):
    """The body is not the JSON the view expects."""


def reminder_json(job: ScheduledJob) -> dict[str, Any]:
    payload = job.payload or {}
    return {
        "id": job.id,
        "user_id": payload.get("user_id"),
        "message": payload.get("message"),
        "due_at": job.run_at.isoformat(),
        "timezone": job.timezone,
        "status": job.status.value,
        "rescheduled_from": job.rescheduled_from,
    }


def invalid(message: str) -> JsonResponse:
    return JsonResponse({"code": "INVALID_REQUEST", "message": message}, status=422)


def parse_body(request: HttpRequest, required: tuple[str, ...]) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError as error:
        raise BadRequest(f"the body is not JSON: {error}") from error
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    missing = [name for name in required if not isinstance(body.get(name), str)]
    if missing:
        raise BadRequest(f"missing or not a string: {', '.join(missing)}")
    try:
        body["due_at"] = datetime.fromisoformat(body["due_at"])
    except ValueError as error:
        raise BadRequest(f"due_at is not an ISO 8601 time: {error}") from error
    return body


def find(service: ScheduleService, reminder_id: str) -> ScheduledJob:
    job = service.get_by_id(reminder_id)
    if job is None or job.topic != REMINDER_TOPIC:
        raise JobNotFound(reminder_id)
    return job


# A JSON API called by scripts, as the FastAPI example's: no browser session, so no CSRF cookie to
# check (a real app authenticates its callers, e.g. with a token).
@csrf_exempt
@require_http_methods(["GET", "POST"])
def reminders(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return create_reminder(request)
    return list_reminders(request)


# --8<-- [start:create]
@inject
def create_reminder(
    request: HttpRequest, service: ScheduleService = Provide[ScheduleContainer.schedule_service]
) -> HttpResponse:
    try:
        body = parse_body(request, required=("user_id", "message", "due_at"))
    except BadRequest as error:
        return invalid(str(error))
    spec = OneShotSpec(
        topic=REMINDER_TOPIC,
        run_at=body["due_at"],
        timezone=body.get("timezone") or "UTC",
        payload={"user_id": body["user_id"], "message": body["message"]},
        metadata=JobMetadata(owner_id=body["user_id"], client_request_id=body.get("client_request_id")),
    )
    # The job and the app's row commit together or not at all: if anything in the block raises,
    # neither exists and the reminder never fires. (A ScheduleError becomes JSON in the middleware.)
    with transaction.atomic():
        job = service.schedule_at(spec, connection=db.connection)
        Reminder.objects.create(job_id=job.id, user_id=body["user_id"], message=body["message"])
    return JsonResponse(reminder_json(job), status=201)


# --8<-- [end:create]


@inject
def list_reminders(
    request: HttpRequest, service: ScheduleService = Provide[ScheduleContainer.schedule_service]
) -> HttpResponse:
    try:
        limit = int(request.GET.get("limit", "20"))
    except ValueError:
        return invalid("limit must be an integer")
    page = service.list(
        owner_id=request.GET.get("owner"),
        topic=REMINDER_TOPIC,
        status=request.GET.getlist("status") or None,
        limit=limit,
        cursor=request.GET.get("cursor"),
    )
    return JsonResponse({"items": [reminder_json(j) for j in page.items], "next_cursor": page.next_cursor})


@csrf_exempt
@require_http_methods(["GET", "DELETE"])
@inject
def reminder(
    request: HttpRequest,
    reminder_id: str,
    service: ScheduleService = Provide[ScheduleContainer.schedule_service],
) -> HttpResponse:
    if request.method == "DELETE":
        service.cancel(reminder_id)  # idempotent; JobNotFound becomes 404
        return HttpResponse(status=204)
    return JsonResponse(reminder_json(find(service, reminder_id)))


@csrf_exempt
@require_POST
@inject
def reschedule_reminder(
    request: HttpRequest,
    reminder_id: str,
    service: ScheduleService = Provide[ScheduleContainer.schedule_service],
) -> HttpResponse:
    """Replaces the reminder: the answer has a new id (``rescheduled_from`` is the old one)."""
    try:
        body = parse_body(request, required=("due_at",))
    except BadRequest as error:
        return invalid(str(error))
    old = find(service, reminder_id)
    spec = OneShotSpec(
        topic=REMINDER_TOPIC,
        run_at=body["due_at"],
        timezone=body.get("timezone") or old.timezone,
        payload=old.payload,
        metadata=JobMetadata(owner_id=old.metadata.owner_id),
    )
    return JsonResponse(reminder_json(service.reschedule(reminder_id, spec)))


def sent(request: HttpRequest) -> HttpResponse:
    """What the listener has sent (a real app would have e-mailed it instead)."""
    rows = SentReminder.objects.order_by("sent_at")
    return JsonResponse([row.as_dict() for row in rows], safe=False)
