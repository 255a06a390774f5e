"""The Django app's read-only models (:class:`Job`, :class:`Fire`), importable from here; they
are defined in the app's own package (:mod:`schedule_sdk.contrib.django.schedule_sdk.models`)."""

from __future__ import annotations

from schedule_sdk.contrib.django.schedule_sdk.models import Fire, Job

__all__ = ["Fire", "Job"]
