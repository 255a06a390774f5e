"""Deprecated: moved to :mod:`schedule_sdk.adapters.sql.sessions`."""

from __future__ import annotations

from schedule_sdk.adapters.stores import moved

__getattr__ = moved(
    __name__,
    "schedule_sdk.adapters.sql.sessions",
)
