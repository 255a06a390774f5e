"""What the app keeps itself: the reminders it has sent (the SDK keeps the schedule)."""

from __future__ import annotations

from django.db import models


class Reminder(models.Model):
    """The app's own row for a reminder, written in the same transaction as its job."""

    job_id = models.CharField(max_length=36, unique=True)
    user_id = models.CharField(max_length=255)
    message = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)


class SentReminder(models.Model):
    """One sent reminder. Events arrive at least once; ``dedup_key`` makes a replay a no-op."""

    dedup_key = models.CharField(max_length=80, unique=True)
    reminder_id = models.CharField(max_length=36, db_index=True)
    user_id = models.CharField(max_length=255)
    message = models.TextField()
    due_at = models.DateTimeField()
    sent_at = models.DateTimeField()

    def as_dict(self) -> dict[str, str]:
        return {
            "reminder_id": self.reminder_id,
            "user_id": self.user_id,
            "message": self.message,
            "due_at": self.due_at.isoformat(),
            "sent_at": self.sent_at.isoformat(),
        }
