"""Read-only Django models over the SDK's tables, for the admin (``managed = False``: the tables
are the SDK's, created by its Alembic migrations; every change goes through ``ScheduleService``)."""

from __future__ import annotations

from django.db import models


class Job(models.Model):
    """A scheduled job (``schedule_jobs``): see :class:`~schedule_sdk.ScheduledJob`."""

    id = models.CharField(primary_key=True, max_length=36)
    topic = models.CharField(max_length=200)
    status = models.CharField(max_length=16)
    run_at = models.DateTimeField()
    scheduled_for = models.DateTimeField()
    timezone = models.CharField(max_length=64)
    payload = models.TextField(null=True)
    owner_id = models.CharField(max_length=255, null=True)
    tenant_id = models.CharField(max_length=255, null=True)
    correlation_id = models.CharField(max_length=255, null=True)
    client_request_id = models.CharField(max_length=255, null=True)
    repeat = models.TextField(null=True)
    retry = models.TextField()
    occurrence = models.IntegerField()
    attempt = models.IntegerField()
    occurrence_count = models.IntegerField()
    repeat_limit = models.IntegerField(null=True)
    ends_at = models.DateTimeField(null=True)
    last_fired_at = models.DateTimeField(null=True)
    last_error = models.TextField(null=True)
    claimed_by = models.CharField(max_length=64, null=True)
    claimed_until = models.DateTimeField(null=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    rescheduled_from = models.CharField(max_length=36, null=True)
    rescheduled_to = models.CharField(max_length=36, null=True)
    misfire = models.TextField(null=True)
    regular_due = models.DateTimeField(null=True)
    trace_context = models.TextField(null=True)
    concurrency_key = models.CharField(max_length=200, null=True)
    concurrency_limit = models.IntegerField(null=True)
    overlap = models.CharField(max_length=16, null=True)
    time_limit_ms = models.IntegerField(null=True)
    spread_ms = models.IntegerField(null=True)
    spread_offset_ms = models.IntegerField(null=True)
    jitter_ms = models.IntegerField(null=True)
    calendar = models.TextField(null=True)
    run_of = models.CharField(max_length=36, null=True)
    last_outcome = models.CharField(max_length=16, null=True)
    notice = models.CharField(max_length=16, null=True)

    class Meta:
        managed = False
        db_table = "schedule_jobs"
        ordering = ("-id",)  # ids are UUIDv7: newest first

    def __str__(self) -> str:
        return f"{self.topic} {self.id}"


class Fire(models.Model):
    """One fire of a job (``schedule_fires``): see :class:`~schedule_sdk.FireRecord`."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.CharField(max_length=36)
    topic = models.CharField(max_length=200)
    occurrence = models.IntegerField()
    attempt = models.IntegerField()
    due_at = models.DateTimeField()
    fired_at = models.DateTimeField()
    lateness_ms = models.BigIntegerField()
    duration_ms = models.BigIntegerField()
    outcome = models.CharField(max_length=16)
    error = models.TextField(null=True)
    worker_id = models.CharField(max_length=64, null=True)
    traceback = models.TextField(null=True)

    class Meta:
        managed = False
        db_table = "schedule_fires"
        ordering = ("-fired_at",)
        verbose_name = "fire"

    def __str__(self) -> str:
        return f"{self.job_id} #{self.occurrence}.{self.attempt} {self.outcome}"
