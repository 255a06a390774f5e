"""The SDK's tables in a Django project: its Alembic migrations, run by ``manage.py migrate``."""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS

from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.django import lent_engine


def upgrade(wrapper: Any) -> None:
    """Bring the SDK's tables to the latest revision where the SDK keeps them: on ``wrapper``'s
    connection (Django's ``default`` database, the test database during tests) when the SDK uses
    Django's database, else in the SDK's own ``database_url`` (once, when migrating ``default``)."""
    from django.apps import apps

    from schedule_sdk.contrib.django import APP_LABEL

    config = apps.get_app_config(APP_LABEL)
    if wrapper.alias != DEFAULT_DB_ALIAS:
        return
    if not config.in_django_database:
        schema.upgrade(config.container.engine())
        return
    with lent_engine(wrapper) as engine:
        schema.upgrade(engine)


def downgrade(wrapper: Any) -> None:
    """Drop the SDK's tables (``manage.py migrate schedule_sdk zero``) when they are in Django's
    database; a database of the SDK's own is left alone."""
    from django.apps import apps

    from schedule_sdk.contrib.django import APP_LABEL

    if wrapper.alias != DEFAULT_DB_ALIAS or not apps.get_app_config(APP_LABEL).in_django_database:
        return
    with lent_engine(wrapper) as engine:
        schema.downgrade(engine)
