"""The JetStream adapters against the real NATS server (this run's own streams): commands in
through the durable consumer, DueTimeReached out with Nats-Msg-Id = envelope id, bad commands
terminated and dead-lettered while the consumer keeps running, store failures redelivered."""

from __future__ import annotations

import json
import time

import pytest

from schedule_sdk.domain.errors import StoreUnavailable
from schedule_sdk.timer import Timer, TimerSettings, TimerState
from tests.timer.conftest import command, wait_until
from tests.timer.probe import Probe

pytestmark = pytest.mark.nats


@pytest.fixture
def probe(nats_names):
    probe = Probe(nats_names)
    yield probe
    probe.close()


@pytest.fixture
def nats_timer(timer_db, nats_names):
    timers: list[Timer] = []

    def make(**overrides):
        values = {"db_path": timer_db, "lease_seconds": 2.0, "retry_delay_ms": 200, "heal_interval": 0}
        values.update(nats_names)
        values.update(overrides)
        timer = Timer(TimerSettings.load(values, environ={}))
        timers.append(timer)
        return timer.start()

    yield make
    for timer in timers:
        timer.close()


def test_schedule_timer_in_due_time_reached_out(nats_timer, probe):
    timer = nats_timer()
    probe.listen()
    commands = [
        command(f"tenant-{i % 3}", f"sc-{i}", ms=300 + 20 * i, correlation_id=f"c{i}") for i in range(12)
    ]
    for cmd in commands:
        probe.send(cmd)
    assert wait_until(lambda: len(probe.envelopes) == 12, timeout=15)
    by_key = {(e.tenant_id, e.payload.service_call_id): e for e in probe.envelopes}
    for i, cmd in enumerate(commands):
        envelope = by_key[(cmd.tenant_id, cmd.service_call_id)]
        assert envelope.payload.reached_at >= cmd.due_at
        assert envelope.correlation_id == f"c{i}" and envelope.aggregate_id == cmd.service_call_id
    assert [h["Nats-Msg-Id"] for h in probe.headers] == [e.id for e in probe.envelopes]
    # published first, then marked Reached (docs/explanation/timer.md): the mark follows shortly
    assert wait_until(
        lambda: all(
            timer.queries.get(c.tenant_id, c.service_call_id).state is TimerState.REACHED for c in commands
        ),
        timeout=5,
    )
    assert timer.metrics.count("timer.commands.received") == 12


BAD = [
    b"{not json",
    json.dumps({"serviceCallId": "x", "dueAt": "2026-11-21T10:00:00Z"}).encode(),
    json.dumps({"tenantId": "", "serviceCallId": "x", "dueAt": "2026-11-21T10:00:00Z"}).encode(),
    json.dumps({"tenantId": "t", "serviceCallId": 5, "dueAt": "2026-11-21T10:00:00Z"}).encode(),
    json.dumps({"tenantId": "t", "serviceCallId": "x", "dueAt": "soon"}).encode(),
    json.dumps({"tenantId": "t", "serviceCallId": "x", "dueAt": "2026-11-21T10:00:00"}).encode(),
]


def test_bad_commands_are_terminated_recorded_and_the_consumer_keeps_running(nats_timer, probe, timer_db):
    timer = nats_timer()
    probe.listen()
    for raw in BAD:
        probe.send(raw)
    probe.send(command("tenant-a", "good", ms=100))
    assert wait_until(lambda: probe.keys() == [("tenant-a", "good")], timeout=10)
    assert wait_until(lambda: len(probe.dead) == len(BAD), timeout=5)
    assert sorted(raw for raw, _ in probe.dead) == sorted(BAD)
    assert {h["Timer-Error-Code"] for _, h in probe.dead} == {"TIMER_INVALID_COMMAND"}
    assert timer.metrics.count("timer.commands.rejected") == len(BAD)
    assert timer.metrics.count("timer.commands.received") == len(BAD) + 1
    with timer.engine.begin() as conn:  # nothing written for them
        import sqlalchemy as sa

        assert conn.execute(sa.text("SELECT count(*) FROM timer_schedules")).scalar() == 1
    time.sleep(1.0)  # terminated, so never redelivered
    assert len(probe.dead) == len(BAD)
    info = probe.nats.run(
        probe.nats.js.consumer_info(probe.names["command_stream"], probe.names["consumer"]), 5
    )
    assert info.num_ack_pending == 0 and info.num_pending == 0


def test_commands_are_acked_only_after_they_are_persisted(nats_timer, probe):
    timer = nats_timer()
    probe.listen()
    persist = timer.service.handle_each
    failures = []

    def failing_once(commands):
        if not failures:
            failures.append(len(commands))
            raise StoreUnavailable("database is down")
        return persist(commands)

    timer.service.handle_each = failing_once  # what the consumer calls
    probe.send(command("tenant-a", "sc-1", ms=200))
    assert wait_until(lambda: probe.keys() == [("tenant-a", "sc-1")], timeout=15)
    assert failures == [1]  # the first delivery failed to persist, was not acked, and came back
    assert wait_until(lambda: timer.queries.get("tenant-a", "sc-1").state is TimerState.REACHED, timeout=5)


def test_many_tenants_never_see_each_others_events(nats_timer, probe):
    nats_timer()
    probe.listen()
    commands = [command(f"tenant-{t}", "same-call", ms=200) for t in range(5)]
    probe.send_many(commands)
    assert wait_until(lambda: len(probe.envelopes) == 5, timeout=10)
    assert sorted(probe.keys()) == [(f"tenant-{t}", "same-call") for t in range(5)]
    assert all(e.tenant_id == e.payload.tenant_id for e in probe.envelopes)
