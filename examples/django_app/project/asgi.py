"""The ASGI entry point: the Django project, with the schedule_sdk dashboard mounted at
``/scheduler/`` (run from examples/django_app: ``uvicorn project.asgi:application``).

The dashboard shares the container schedule_sdk's Django app built in ``AppConfig.ready()``. It is
read-only unless ``SCHEDULE_DASHBOARD_TOKEN`` holds an access token (or pass ``auth=`` a function
that decides from the request, e.g. from Django's session cookie).
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application
from starlette.applications import Starlette
from starlette.routing import Mount

from schedule_sdk.contrib.django import container
from schedule_sdk.dashboard import create_dashboard

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_application = get_asgi_application()  # sets Django up: the apps are ready after this

dashboard = create_dashboard(container(), token=os.environ.get("SCHEDULE_DASHBOARD_TOKEN") or None)

application = Starlette(
    routes=[
        Mount("/scheduler", app=dashboard),
        Mount("/", app=django_application),
    ]
)
