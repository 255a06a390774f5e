"""The example of docs/howto/testing.md, run as a test."""

from __future__ import annotations

# --8<-- [start:example]
from datetime import UTC, datetime, timedelta

from schedule_sdk import (
    Backoff,
    JobStatus,
    ListenerRegistry,
    OneShotSpec,
    RetryPolicy,
    schedule_arrived_event_name,
)
from schedule_sdk.testing import make_test_kit


class Mailer:  # your app's listener
    def __init__(self):
        self.sent, self.down = [], 0

    def on_reminder(self, event):
        if self.down:
            self.down -= 1
            raise ConnectionError("mail server down")
        self.sent.append(event.user_payload["to"])


def test_reminder_is_retried_until_the_mail_goes_out():
    mailer = Mailer()
    registry = ListenerRegistry()
    registry.connect(schedule_arrived_event_name("reminder"), mailer.on_reminder)
    kit = make_test_kit(registry, start=datetime(2031, 5, 4, 9, 0, tzinfo=UTC))

    job = kit.service.schedule_at(
        OneShotSpec(
            topic="reminder",
            run_at=kit.clock.now() + timedelta(minutes=1),
            timezone="Europe/Lisbon",
            payload={"to": "ana"},
            retry=RetryPolicy(attempts=4, backoff=Backoff(type="exponential", delay_ms=60_000)),
        )
    )
    mailer.down = 2

    kit.clock.advance(59)
    assert kit.run_due() == []  # never early
    kit.run_due(until=timedelta(minutes=10))  # attempts at +1, +2 and +4 minutes

    assert [e.attempt for e in kit.events] == [1, 2, 3]
    assert mailer.sent == ["ana"]
    assert kit.job(job.id).status is JobStatus.COMPLETED


# --8<-- [end:example]
