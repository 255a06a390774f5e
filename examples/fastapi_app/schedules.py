"""The app's own schedule, declared in code: a digest of the reminders sent so far.

``@every`` on a method of a class the container provides: the schedule exists exactly once in the
store however many app processes start, follows this code on each deploy, and each fire calls
``run`` on the ``Digest`` the container gives (a ``Singleton``: always the same one).
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import Any

from schedule_sdk import ScheduleArrivedEvent, every

from .sent import SentReminders

logger = logging.getLogger(__name__)

#: How often the digest runs (an hour; DIGEST_EVERY_SECONDS changes it, e.g. for a demo).
DIGEST_EVERY = timedelta(seconds=float(os.environ.get("DIGEST_EVERY_SECONDS", "3600")))


# --8<-- [start:digest]
class Digest:
    """Counts the reminders sent; a real app would e-mail the count to an operator."""

    def __init__(self, sent: SentReminders) -> None:
        self._sent = sent
        #: Every digest this process made, newest last.
        self.runs: list[dict[str, Any]] = []

    @every(DIGEST_EVERY, name="reminders.digest")
    def run(self, event: ScheduleArrivedEvent) -> None:
        digest = {
            "at": event.scheduled_for.isoformat(),
            "sent": len(self._sent.all()),
            "job_id": event.scheduled_job_id,
        }
        self.runs.append(digest)
        logger.info("digest: %s reminder(s) sent so far", digest["sent"])


# --8<-- [end:digest]
