"""Integrations with web frameworks: :mod:`schedule_sdk.contrib.django`."""
