"""The project's URLs: everything is in the reminders app."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [path("", include("reminders.urls"))]
