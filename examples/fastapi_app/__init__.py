"""Task reminders: a small FastAPI app on schedule_sdk (see application.py for how to run it)."""

from __future__ import annotations
