from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.CreateModel(
            name="SentReminder",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("dedup_key", models.CharField(max_length=80, unique=True)),
                ("reminder_id", models.CharField(db_index=True, max_length=36)),
                ("user_id", models.CharField(max_length=255)),
                ("message", models.TextField()),
                ("due_at", models.DateTimeField()),
                ("sent_at", models.DateTimeField()),
            ],
        ),
    ]
