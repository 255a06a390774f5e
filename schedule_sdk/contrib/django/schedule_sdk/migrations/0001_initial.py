"""The SDK's tables, by the SDK's own Alembic migrations (one source of truth), and the admin's
read-only models over them (``managed = False``: Django creates no table of its own).

Later Alembic revisions need no Django migration: every ``manage.py migrate`` brings the tables
to the latest one (``post_migrate``, see ``apps.py``).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def upgrade(apps: Any, schema_editor: Any) -> None:
    from schedule_sdk.contrib.django.schema import upgrade as upgrade_tables

    upgrade_tables(schema_editor.connection)


def downgrade(apps: Any, schema_editor: Any) -> None:
    from schedule_sdk.contrib.django.schema import downgrade as drop_tables

    drop_tables(schema_editor.connection)


class Migration(migrations.Migration):
    initial = True
    # Alembic runs on Django's connection outside Django's transaction (it has its own order of
    # statements, and on SQLite rebuilds tables).
    atomic = False

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.RunPython(upgrade, downgrade),
        migrations.CreateModel(
            name="Fire",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("job_id", models.CharField(max_length=36)),
                ("topic", models.CharField(max_length=200)),
                ("occurrence", models.IntegerField()),
                ("attempt", models.IntegerField()),
                ("due_at", models.DateTimeField()),
                ("fired_at", models.DateTimeField()),
                ("lateness_ms", models.BigIntegerField()),
                ("duration_ms", models.BigIntegerField()),
                ("outcome", models.CharField(max_length=16)),
                ("error", models.TextField(null=True)),
                ("worker_id", models.CharField(max_length=64, null=True)),
            ],
            options={
                "verbose_name": "fire",
                "db_table": "schedule_fires",
                "ordering": ("-fired_at",),
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Job",
            fields=[
                ("id", models.CharField(max_length=36, primary_key=True, serialize=False)),
                ("topic", models.CharField(max_length=200)),
                ("status", models.CharField(max_length=16)),
                ("run_at", models.DateTimeField()),
                ("scheduled_for", models.DateTimeField()),
                ("timezone", models.CharField(max_length=64)),
                ("payload", models.TextField(null=True)),
                ("owner_id", models.CharField(max_length=255, null=True)),
                ("tenant_id", models.CharField(max_length=255, null=True)),
                ("correlation_id", models.CharField(max_length=255, null=True)),
                ("client_request_id", models.CharField(max_length=255, null=True)),
                ("repeat", models.TextField(null=True)),
                ("retry", models.TextField()),
                ("occurrence", models.IntegerField()),
                ("attempt", models.IntegerField()),
                ("occurrence_count", models.IntegerField()),
                ("repeat_limit", models.IntegerField(null=True)),
                ("ends_at", models.DateTimeField(null=True)),
                ("last_fired_at", models.DateTimeField(null=True)),
                ("last_error", models.TextField(null=True)),
                ("claimed_by", models.CharField(max_length=64, null=True)),
                ("claimed_until", models.DateTimeField(null=True)),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
                ("rescheduled_from", models.CharField(max_length=36, null=True)),
                ("rescheduled_to", models.CharField(max_length=36, null=True)),
                ("misfire", models.TextField(null=True)),
                ("regular_due", models.DateTimeField(null=True)),
                ("trace_context", models.TextField(null=True)),
                ("concurrency_key", models.CharField(max_length=200, null=True)),
                ("concurrency_limit", models.IntegerField(null=True)),
                ("overlap", models.CharField(max_length=16, null=True)),
                ("time_limit_ms", models.IntegerField(null=True)),
                ("spread_ms", models.IntegerField(null=True)),
                ("spread_offset_ms", models.IntegerField(null=True)),
                ("jitter_ms", models.IntegerField(null=True)),
                ("calendar", models.TextField(null=True)),
                ("run_of", models.CharField(max_length=36, null=True)),
                ("last_outcome", models.CharField(max_length=16, null=True)),
                ("notice", models.CharField(max_length=16, null=True)),
            ],
            options={
                "db_table": "schedule_jobs",
                "ordering": ("-id",),
                "managed": False,
            },
        ),
    ]
