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
from schedule_sdk.contrib.django.schedule_sdk.models import Fire, Job
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.history import FireOutcome
from schedule_sdk.domain.status import JobStatus

_JOB_COLUMNS = (
    "id",
    "topic",
    "status",
    "last_outcome",
    "notice",
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


def _steer(verb: str, done_verb: str, call: Callable[[Any, str], object]) -> Callable[..., None]:
    """An admin action applying ``call(service, job_id)`` to each selected job: named in the
    imperative ("Cancel selected jobs"), reporting in the past ("Cancelled: 3 job(s)")."""

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
            model_admin.message_user(request, f"{done_verb}: {done} job(s)", messages.SUCCESS)
        for text in refused[:10]:
            model_admin.message_user(request, text, messages.WARNING)
        if len(refused) > 10:
            model_admin.message_user(request, f"... and {len(refused) - 10} more refused", messages.WARNING)

    action.__name__ = verb.lower()
    decorated: Callable[..., None] = admin.action(description=f"{verb} selected jobs", permissions=["steer"])(
        action
    )
    return decorated


class _EveryValue(admin.SimpleListFilter):
    """A filter listing every value the SDK can store, not only those that occurred so far."""

    values: tuple[str, ...] = ()

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(value, value) for value in self.values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(**{self.parameter_name: value}) if value else queryset


class StatusFilter(_EveryValue):
    title = "status"
    parameter_name = "status"
    values = tuple(status.value for status in JobStatus)


class OutcomeFilter(_EveryValue):
    title = "outcome"
    parameter_name = "outcome"
    values = tuple(outcome.value for outcome in FireOutcome)


class LastOutcomeFilter(_EveryValue):
    """How a job's last attempt ended (``unheard``: a fire no listener heard), whatever its status."""

    title = "last outcome"
    parameter_name = "last_outcome"
    values = tuple(outcome.value for outcome in FireOutcome)


@admin.register(Job)
class JobAdmin(ReadOnly):
    list_display = _JOB_COLUMNS
    list_filter = (StatusFilter, LastOutcomeFilter)
    search_fields = ("=id", "topic", "=owner_id", "=tenant_id")
    show_full_result_count = False  # no unbounded COUNT(*) over the jobs
    list_per_page = 50
    actions = [
        _steer("Cancel", "Cancelled", lambda service, job_id: service.cancel(job_id)),
        _steer("Pause", "Paused", lambda service, job_id: service.pause(job_id)),
        _steer("Resume", "Resumed", lambda service, job_id: service.resume(job_id)),
        _steer("Trigger", "Triggered", lambda service, job_id: service.trigger(job_id)),
        _steer("Requeue", "Requeued", lambda service, job_id: service.requeue(job_id)),
    ]


@admin.register(Fire)
class FireAdmin(ReadOnly):
    list_display = ("fired_at", "job_id", "topic", "occurrence", "attempt", "outcome", "lateness_ms", "error")
    list_filter = (OutcomeFilter,)
    search_fields = ("=job_id", "topic")
    show_full_result_count = False
    list_per_page = 50
