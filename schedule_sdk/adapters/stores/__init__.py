"""Deprecated import paths: the SQL job store and its modules are in :mod:`schedule_sdk.adapters.sql`
(the driver-level hot paths in :mod:`schedule_sdk.adapters.sql.fast`), the in-memory store is
:mod:`schedule_sdk.adapters.memory`.

Each module here re-exports the names of its new home; using one warns (``DeprecationWarning``)."""

from __future__ import annotations

from schedule_sdk.domain.moved import moved

__all__ = ["moved"]
