"""The reminders API."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("reminders", views.reminders),
    path("reminders/<str:reminder_id>", views.reminder),
    path("reminders/<str:reminder_id>/reschedule", views.reschedule_reminder),
    path("sent", views.sent),
]
