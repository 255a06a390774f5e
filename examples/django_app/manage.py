#!/usr/bin/env python
"""Django's command-line utility for the reminders example.

Requires: Python 3.11+, Django 5+.
Install:  .venv/bin/pip install -e '.[django]'   (add ',postgres' / ',rq' for those backends)
Run (from examples/django_app/):
          ../../.venv/bin/python manage.py migrate
          ../../.venv/bin/python manage.py runserver            # the JSON API on 127.0.0.1:8000
          ../../.venv/bin/python manage.py schedule_worker      # fires due reminders; Ctrl-C stops it
          ../../.venv/bin/python manage.py schedule_reconcile   # heal the substrate, print the report
          ../../.venv/bin/python manage.py test reminders       # the app's tests (no server needed)
Expected: the worker prints "schedule worker … started" and logs "reminder … sent" when one comes due.
PostgreSQL + Redis: set SCHEDULE_DATABASE_URL and SCHEDULE_REDIS_URL before any of these.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
