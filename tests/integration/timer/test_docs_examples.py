"""The code of docs/howto/timer-nats.md, run against the real NATS server and both stores."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import nats
import pytest

# --8<-- [start:imports]
from schedule_sdk.timer import Envelope, ScheduleTimer, Timer, TimerSettings, TimerState

# --8<-- [end:imports]
from tests.support.timer_fixtures import store_env, store_settings


# --8<-- [start:send]
async def send_schedule_timer(js, due_at: str, subject: str = "timer.commands.schedule") -> None:
    command = {"tenantId": "acme", "serviceCallId": "sc-42", "dueAt": due_at, "correlationId": "req-7"}
    await js.publish(subject, json.dumps(command).encode())  # stored by JetStream, then acked


# --8<-- [end:send]


# --8<-- [start:consume]
async def consume_due_time_reached(
    js,
    handle,
    stream: str = "TIMER_EVENTS",
    subject: str = "timer.events.due-time-reached",
    durable: str = "orchestration",
) -> int:
    sub = await js.pull_subscribe(subject, durable=durable, stream=stream)
    messages = await sub.fetch(100, timeout=5)
    for msg in messages:
        envelope = Envelope.from_json(msg.data)
        handle(envelope.tenant_id, envelope.payload.service_call_id)  # must be idempotent
        await msg.ack()
    return len(messages)


# --8<-- [end:consume]


# --8<-- [start:inprocess]
def run_in_process(db_path: str, when: datetime) -> list[Envelope]:
    received: list[Envelope] = []
    settings = TimerSettings.load({"db_path": db_path, "broker_url": "inprocess"})
    with Timer(settings) as timer:
        timer.bus.subscribe(received.append)  # a subscriber that raises makes the fire retry
        timer.schedule(ScheduleTimer(tenant_id="acme", service_call_id="sc-42", due_at=when))
        entry = timer.queries.get("acme", "sc-42")  # when will it fire, and did it?
        assert entry is not None and entry.due_at == when and entry.state is TimerState.SCHEDULED
        while timer.queries.get("acme", "sc-42").state is not TimerState.REACHED:
            time.sleep(0.01)  # Reached once published
    return received


# --8<-- [end:inprocess]


def test_in_process_example(timer_db, monkeypatch):
    # Due 3 s from now (whole milliseconds, the timer's precision): the example reads the entry
    # back as still scheduled, so it must be due after the Timer has started (its store
    # created and migrated) and taken the command, however busy the machine. A due instant
    # only 0.2 s ahead was reached before that read in a loaded CI run.
    later = datetime.now(UTC) + timedelta(seconds=3)
    when = later.replace(microsecond=later.microsecond // 1000 * 1000)
    for name, value in store_env(
        timer_db
    ).items():  # behind PgBouncer: its settings, as an operator sets them
        monkeypatch.setenv(name, value)
    received = run_in_process(timer_db, when)
    assert [(e.tenant_id, e.payload.service_call_id) for e in received] == [("acme", "sc-42")]


@pytest.mark.nats
def test_nats_examples(timer_db, nats_names):
    settings = TimerSettings.load({**store_settings(timer_db), **nats_names}, environ={})
    handled: list[tuple[str, str]] = []

    async def scenario() -> int:
        nc = await nats.connect(nats_names["broker_url"])
        js = nc.jetstream()
        due = (datetime.now(UTC) + timedelta(milliseconds=200)).isoformat()
        await send_schedule_timer(js, due, subject=nats_names["command_subject"])
        count = 0
        for _ in range(6):  # until the event is there (a fetch waits up to 5 s for one)
            try:
                count += await consume_due_time_reached(
                    js,
                    lambda t, s: handled.append((t, s)),
                    nats_names["event_stream"],
                    nats_names["event_subject"],
                )
            except nats.errors.TimeoutError:
                continue
            if count:
                break
        await nc.close()
        return count

    with Timer(settings):
        assert asyncio.run(scenario()) == 1
    assert handled == [("acme", "sc-42")]
