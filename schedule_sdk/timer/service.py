"""Deprecated: moved to :mod:`schedule_sdk.core.timers`;
the timer's public names are importable from :mod:`schedule_sdk.timer`."""

from __future__ import annotations

from schedule_sdk.domain.moved import moved

__getattr__ = moved(__name__, "schedule_sdk.core.timers")
