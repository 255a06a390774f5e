"""The example of docs/howto/retries.md, run as a test."""

from __future__ import annotations

# --8<-- [start:example]
from datetime import UTC, datetime, timedelta

from schedule_sdk import (
    SCHEDULE_FAILED_EVENT,
    Backoff,
    JobStatus,
    ListenerRegistry,
    OneShotSpec,
    RetryPolicy,
    on_event,
    schedule_arrived_event_name,
)
from schedule_sdk.testing import make_test_kit


class InvalidAddress(Exception):
    """Retrying cannot help: the address is wrong."""


class Billing:  # your app's listeners
    def __init__(self):
        self.dead_letters = []

    @on_event(schedule_arrived_event_name("billing.charge"))
    def charge(self, event):
        if event.user_payload["card"] == "expired":
            raise InvalidAddress("card expired")
        raise ConnectionError("payment gateway unreachable")

    @on_event(SCHEDULE_FAILED_EVENT)  # every job that gave up, whatever its topic
    def dead_letter(self, event):
        self.dead_letters.append((event.scheduled_job_id, event.error_type, event.attempt))


RETRY = RetryPolicy(
    attempts=5,
    # 1 s, 2 s, 4 s, ... but never more than 3 s between two attempts
    backoff=Backoff(type="exponential", delay_ms=1000, max_delay_ms=3000),
    retry_on=(ConnectionError, TimeoutError),  # only these are worth another attempt
    give_up_on=(InvalidAddress,),  # these never are (wins over retry_on)
)


def test_transient_errors_are_retried_and_a_give_up_reaches_the_dead_letter_listener():
    billing = Billing()
    registry = ListenerRegistry()
    registry.register(billing)
    kit = make_test_kit(registry)
    soon = datetime.now(UTC) + timedelta(seconds=1)
    down = kit.service.schedule_at(
        OneShotSpec(topic="billing.charge", run_at=soon, timezone="UTC", payload={"card": "ok"}, retry=RETRY)
    )
    expired = kit.service.schedule_at(
        OneShotSpec(
            topic="billing.charge", run_at=soon, timezone="UTC", payload={"card": "expired"}, retry=RETRY
        )
    )
    kit.run_due(until=timedelta(minutes=1))
    assert kit.job(down.id).status is JobStatus.FAILED and kit.job(down.id).attempt == 5
    assert kit.job(expired.id).status is JobStatus.FAILED and kit.job(expired.id).attempt == 1
    assert sorted(billing.dead_letters) == sorted(
        [(down.id, "builtins.ConnectionError", 5), (expired.id, f"{__name__}.InvalidAddress", 1)]
    )
    # the waits between the five attempts: 1 s, 2 s, then capped at 3 s
    due = sorted(f.due_at for f in kit.service.history(down.id))
    assert [(due[n + 1] - due[n]).total_seconds() for n in range(4)] == [1, 2, 3, 3]


# --8<-- [end:example]
