"""The project's URLs: the admin (schedule_sdk's jobs and fire history among its models) and the
reminders app."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [path("admin/", admin.site.urls), path("", include("reminders.urls"))]
