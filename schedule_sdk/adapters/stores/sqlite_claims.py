"""Deprecated: moved to :mod:`schedule_sdk.adapters.sql.fast.sqlite_claims`."""

from __future__ import annotations

from schedule_sdk.adapters.stores import moved

__getattr__ = moved(
    __name__,
    "schedule_sdk.adapters.sql.fast.sqlite_claims",
)
