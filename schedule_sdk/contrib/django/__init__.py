"""``schedule_sdk.contrib.django``: schedule_sdk as an installable Django app.

Add ``"schedule_sdk.contrib.django"`` to ``INSTALLED_APPS`` and you get:

- the SDK's tables with ``manage.py migrate``: its migration runs the SDK's own Alembic migrations
  (one source of truth), and every later ``migrate`` brings them to the latest revision;
- one :class:`~schedule_sdk.ScheduleContainer` per process, built in ``AppConfig.ready()`` from the
  ``SCHEDULE_SDK`` setting (a dict of SDK settings; without ``database_url`` the SDK keeps its
  tables in Django's ``default`` database, so ``schedule_at(spec, connection=db.connection)``
  commits or rolls back with ``transaction.atomic()``): :func:`container` returns it;
- management commands ``schedule_worker``, ``schedule_reconcile``, ``schedule_cron`` and
  ``schedules plan|apply|list`` (``schedule-sdk schedules`` on this container);
- the schedules declared in code (``@cron``, ``@every``, ``@after``) of every installed app's
  ``schedules`` module, added to the container's ``listener_modules``;
- an admin for jobs and their fire history, with the steering actions (cancel, pause, resume,
  trigger, requeue) running through the ``ScheduleService``.

Settings: ``SCHEDULE_SDK`` (dict, default ``{}``; ``listener_modules`` names the modules whose
``@on_event`` functions are bound), ``SCHEDULE_WORKER_IN_PROCESS`` (bool, default False: a
development convenience that starts a worker inside every Django process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schedule_sdk.bootstrap.container import ScheduleContainer

#: The app's label (``apps.get_app_config(APP_LABEL)``) and its tables' Django app.
APP_LABEL = "schedule_sdk"


def container() -> ScheduleContainer:
    """This process's container, built when Django started (``AppConfig.ready()``)."""
    from django.apps import apps

    built: ScheduleContainer = apps.get_app_config(APP_LABEL).container
    return built
