"""The reminders app: wires its views to the container schedule_sdk's Django app built."""

from __future__ import annotations

from django.apps import AppConfig

from schedule_sdk.contrib.django import container


# --8<-- [start:ready]
class RemindersConfig(AppConfig):
    name = "reminders"

    def ready(self) -> None:
        # schedule_sdk.contrib.django (before this app in INSTALLED_APPS) built the container from
        # settings.SCHEDULE_SDK; its listener_modules name this app's listeners.
        container().wire(modules=[f"{self.name}.views"])


# --8<-- [end:ready]
