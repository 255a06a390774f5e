"""Django settings for the reminders example; ``SCHEDULE_SDK`` configures schedule_sdk."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "insecure-example-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "schedule_sdk.contrib.django",  # the SDK's tables (migrate), its commands and its admin
    "reminders.apps.RemindersConfig",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "reminders.middleware.ScheduleErrorMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "static/"
ROOT_URLCONF = "project.urls"
# SQLite by default; DJANGO_PG_NAME (with PG_HOST/PG_PORT/PG_USER/PG_PASSWORD) selects PostgreSQL.
if os.environ.get("DJANGO_PG_NAME"):
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ["DJANGO_PG_NAME"],
            "HOST": os.environ.get("PG_HOST", "127.0.0.1"),
            "PORT": os.environ.get("PG_PORT", "5432"),
            "USER": os.environ.get("PG_USER", "postgres"),
            "PASSWORD": os.environ.get("PG_PASSWORD", ""),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("DJANGO_DB_PATH", BASE_DIR / "db.sqlite3"),
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LOGGING = {
    "version": 1,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "reminders": {"handlers": ["console"], "level": "INFO"},
        "schedule_sdk": {"handlers": ["console"], "level": "INFO"},
    },
}

# --8<-- [start:schedule_settings]
# Every key is a schedule_sdk setting (docs/reference/settings.md); keys left out come from the
# SCHEDULE_* environment variables, then the defaults. None values are ignored.
# Without database_url the SDK's tables live in Django's own database (manage.py migrate creates
# them), so a view can schedule a job inside transaction.atomic() together with its model writes
# (views.create_reminder).
SCHEDULE_SDK = {
    "database_url": os.environ.get("SCHEDULE_DATABASE_URL"),  # None: Django's database
    "redis_url": os.environ.get("SCHEDULE_REDIS_URL"),
    # Modules whose @on_event functions (and @cron/@every/@after) the container binds, besides
    # every installed app's `schedules` module (reminders.schedules), which it finds itself.
    "listener_modules": ["reminders.listeners"],
}
# How often reminders.schedules.send_digest runs (declared with @every; `manage.py schedules plan`
# shows a change before a deploy applies it).
REMINDERS_DIGEST_EVERY = timedelta(seconds=int(os.environ.get("REMINDERS_DIGEST_SECONDS", "3600")))
# Development only: fire jobs inside the web process (runserver) instead of `manage.py schedule_worker`.
SCHEDULE_WORKER_IN_PROCESS = os.environ.get("SCHEDULE_WORKER_IN_PROCESS") == "1"
# --8<-- [end:schedule_settings]
