"""The app's configuration: builds this process's container when Django starts."""

from __future__ import annotations

import atexit
import logging
from typing import Any

from django.apps import AppConfig, apps
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models.signals import post_migrate
from django.utils.module_loading import module_has_submodule

from schedule_sdk.adapters.sql.django import url_of
from schedule_sdk.bootstrap.container import ScheduleContainer
from schedule_sdk.bootstrap.settings import Settings

logger = logging.getLogger(__name__)


class ScheduleSdkConfig(AppConfig):
    name = "schedule_sdk.contrib.django.schedule_sdk"  # the heading of its commands in manage.py help
    label = "schedule_sdk"
    verbose_name = "Scheduled jobs"
    default_auto_field = "django.db.models.BigAutoField"
    container: ScheduleContainer
    #: True when the SDK's tables are in Django's default database (no ``database_url`` given).
    in_django_database: bool

    def ready(self) -> None:
        values: dict[str, Any] = dict(getattr(settings, "SCHEDULE_SDK", {}) or {})
        self.in_django_database = not values.get("database_url")
        if self.in_django_database:
            values["database_url"] = django_database_url(DEFAULT_DB_ALIAS)
        discovered = declaring_modules()
        if discovered:  # after the configured listener modules, each once
            configured = Settings.load({"listener_modules": values.get("listener_modules")}).listener_modules
            values["listener_modules"] = list(dict.fromkeys([*configured, *discovered]))
        self.container = ScheduleContainer()  # connects nothing until first used
        self.container.config.from_dict(values)
        post_migrate.connect(_upgrade_after_migrate, sender=self)
        if getattr(settings, "SCHEDULE_WORKER_IN_PROCESS", False):  # development only
            worker = self.container.worker().start()
            atexit.register(worker.stop)


#: The module of an installed app whose ``@cron`` / ``@every`` / ``@after`` functions (and
#: ``@on_event`` listeners) the container binds, found as the admin finds ``admin.py``.
SCHEDULES_MODULE = "schedules"


def declaring_modules() -> list[str]:
    """The ``schedules`` modules of the installed apps, in ``INSTALLED_APPS`` order (found, not
    imported: the container imports them when it first binds its listeners or syncs)."""
    return [
        f"{config.name}.{SCHEDULES_MODULE}"
        for config in apps.get_app_configs()
        if config.module is not None and module_has_submodule(config.module, SCHEDULES_MODULE)
    ]


def django_database_url(alias: str) -> str:
    """The SQLAlchemy URL of a Django database (with its password), for the SDK's own engine."""
    wrapper = connections[alias]
    url = url_of(wrapper)
    password = wrapper.settings_dict.get("PASSWORD")
    if password:
        url = url.set(password=password)
    return url.render_as_string(hide_password=False)


def _upgrade_after_migrate(sender: ScheduleSdkConfig, using: str = DEFAULT_DB_ALIAS, **_: Any) -> None:
    """Every ``manage.py migrate`` brings the SDK's tables to the latest Alembic revision (a no-op
    when they are there), so a release's new revisions need no Django migration of their own."""
    from schedule_sdk.contrib.django.schema import upgrade

    upgrade(connections[using])
