"""Deprecated: moved to :mod:`schedule_sdk.bootstrap.timer_settings`;
the timer's public names are importable from :mod:`schedule_sdk.timer`."""

from __future__ import annotations

from schedule_sdk.domain.moved import moved

__getattr__ = moved(__name__, "schedule_sdk.bootstrap.timer_settings")
