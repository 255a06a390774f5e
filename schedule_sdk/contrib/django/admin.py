"""The admin: jobs and their fire history, read-only, with the steering actions.

Rows are never edited through the ORM: an action calls the ``ScheduleService`` of this process's
container (cancel, pause, resume, trigger, requeue) for each selected job, each in its own
transaction, and reports what was done and what was refused (a typed error per job).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from schedule_sdk.contrib.django import container
from schedule_sdk.contrib.django.models import Fire, Job
from schedule_sdk.domain.errors import ScheduleError

_JOB_COLUMNS = (
    "id",
    "topic",
    "status",
    "run_at",
    "occurrence",
    "attempt",
    "owner_id",
    "tenant_id",
    "last_error",
)


class ReadOnly(admin.ModelAdmin):
    """Nothing is added, changed or deleted through the ORM."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_steer_permission(self, request: HttpRequest) -> bool:
        """The steering actions need the model's ``change`` permission (superusers have it)."""
        opts = self.opts
        return bool(request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}"))


def _steer(verb: str, call: Callable[[Any, str], object]) -> Callable[..., None]:
    """An admin action applying ``call(service, job_id)`` to each selected job."""

    def action(model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        service = container().schedule_service()
        done, refused = 0, []
        for job_id in queryset.values_list("id", flat=True):
            try:
                call(service, job_id)
                done += 1
            except ScheduleError as error:
                refused.append(f"{error.code}: {error.message}")
        if done:
            model_admin.message_user(request, f"{verb}: {done} job(s)", messages.SUCCESS)
        for text in refused[:10]:
            model_admin.message_user(request, text, messages.WARNING)
        if len(refused) > 10:
            model_admin.message_user(request, f"... and {len(refused) - 10} more refused", messages.WARNING)

    action.__name__ = verb.lower()
    decorated: Callable[..., None] = admin.action(description=f"{verb} selected jobs", permissions=["steer"])(
        action
    )
    return decorated


@admin.register(Job)
class JobAdmin(ReadOnly):
    list_display = _JOB_COLUMNS
    list_filter = ("status",)
    search_fields = ("=id", "topic", "=owner_id", "=tenant_id")
    show_full_result_count = False  # no unbounded COUNT(*) over the jobs
    list_per_page = 50
    actions = [
        _steer("Cancelled", lambda service, job_id: service.cancel(job_id)),
        _steer("Paused", lambda service, job_id: service.pause(job_id)),
        _steer("Resumed", lambda service, job_id: service.resume(job_id)),
        _steer("Triggered", lambda service, job_id: service.trigger(job_id)),
        _steer("Requeued", lambda service, job_id: service.requeue(job_id)),
    ]


@admin.register(Fire)
class FireAdmin(ReadOnly):
    list_display = ("fired_at", "job_id", "topic", "occurrence", "attempt", "outcome", "lateness_ms", "error")
    list_filter = ("outcome",)
    search_fields = ("=job_id", "topic")
    show_full_result_count = False
    list_per_page = 50
