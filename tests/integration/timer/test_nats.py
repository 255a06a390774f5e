"""The JetStream adapters against the real NATS server (this run's own streams): commands in
through the durable consumer, DueTimeReached out with Nats-Msg-Id = envelope id, bad commands
terminated and dead-lettered while the consumer keeps running, store failures redelivered."""

from __future__ import annotations

import json
import logging
import re

import pytest

from schedule_sdk.adapters.brokers.nats import SPARE_DELIVERIES
from schedule_sdk.domain.errors import StoreUnavailable
from schedule_sdk.timer import Timer, TimerSettings, TimerState
from tests.support.timer_fixtures import command, store_settings
from tests.support.timer_probe import Probe
from tests.support.waiting import wait_until

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
        values = {**store_settings(timer_db), "lease_seconds": 2.0, "retry_delay_ms": 200, "heal_interval": 0}
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
    # control characters in an id (an ANSI escape, a line break, a C1 control): refused, not stored
    json.dumps({"tenantId": "t\x1b[31m", "serviceCallId": "x", "dueAt": "2026-11-21T10:00:00Z"}).encode(),
    json.dumps({"tenantId": "t", "serviceCallId": "x\r\nFAKE", "dueAt": "2026-11-21T10:00:00Z"}).encode(),
    json.dumps(
        {"tenantId": "t", "serviceCallId": "x", "correlationId": "c\x85", "dueAt": "2026-11-21T10:00:00Z"}
    ).encode(),
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

    def settled() -> bool:  # terminated, not left for redelivery: nothing pending or unacked
        info = probe.nats.run(
            probe.nats.js.consumer_info(probe.names["command_stream"], probe.names["consumer"]), 5
        )
        return info.num_ack_pending == 0 and info.num_pending == 0

    assert wait_until(settled, timeout=10)
    assert len(probe.dead) == len(BAD)


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


# -- poison commands: one bad command must never stall the intake of the others ----------------

#: Each of these once left its whole batch un-acked and redelivered forever (an exception other
#: than InvalidTimerCommand while decoding, or a store that failed on the batch). Valid commands
#: sent around them must still be stored at once.
POISON = [
    pytest.param(
        b'{"tenantId":"t","serviceCallId":"x","dueAt":"9999-12-31T23:59:59.999999+00:00"}', id="overflow"
    ),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested-100k-deep"),
    pytest.param(
        b'{"tenantId":"\\ud800","serviceCallId":"x","dueAt":"2026-11-21T10:00:00Z"}', id="surrogate"
    ),
    pytest.param(b'{"tenantId":"a\\u0000b","serviceCallId":"x","dueAt":"2026-11-21T10:00:00Z"}', id="nul"),
]
#: How soon the valid commands of a burst must be stored (the consumer fetches every 0.5 s at most).
STORED_WITHIN = 1.5
LATER = 3_600_000  # ms: due well after the test, so "stored" is all that is looked at


def _stored(timer, *keys):
    return all(timer.queries.get(tenant, call) is not None for tenant, call in keys)


def _consumer(probe):
    return probe.nats.run(
        probe.nats.js.consumer_info(probe.names["command_stream"], probe.names["consumer"]), 5
    )


def _settled(probe):
    info = _consumer(probe)
    return info.num_ack_pending == 0 and info.num_pending == 0


@pytest.mark.parametrize("poison", POISON)
def test_a_poison_command_is_dead_lettered_and_never_holds_up_other_tenants(nats_timer, probe, poison):
    timer = nats_timer()  # on each store backend (timer_db): the NUL case included on PostgreSQL
    probe.listen()
    probe.send_many([command("tenant-a", "ok-a", ms=LATER), poison, command("tenant-b", "ok-b", ms=LATER)])
    assert wait_until(
        lambda: _stored(timer, ("tenant-a", "ok-a"), ("tenant-b", "ok-b")), timeout=STORED_WITHIN
    )
    assert wait_until(lambda: len(probe.dead) == 1, timeout=5)
    raw, headers = probe.dead[0]
    assert raw == poison
    assert headers["Timer-Error-Code"] == "TIMER_INVALID_COMMAND" and headers["Timer-Error"]
    assert headers["Timer-Source-Subject"] == probe.names["command_subject"]
    assert wait_until(lambda: _settled(probe), timeout=5)  # acked or terminated: nothing left to redeliver
    assert _consumer(probe).num_redelivered == 0
    assert timer.metrics.count("timer.commands.rejected") == 1
    with timer.engine.begin() as conn:  # nothing written for it
        import sqlalchemy as sa

        assert conn.execute(sa.text("SELECT count(*) FROM timer_schedules")).scalar() == 2


def test_an_unforeseen_failure_persisting_a_batch_refuses_only_the_guilty_command(nats_timer, probe):
    """A sink whose handle_each raises something other than ScheduleUnavailable for a batch: the
    source retries its commands one by one, stores the others, dead-letters the one at fault."""
    timer = nats_timer()
    probe.listen()
    persist = timer.service.handle_each

    def failing_on_guilty(commands):
        if any(c.service_call_id == "guilty" for c in commands):
            raise RuntimeError("a defect triggered by one command")
        return persist(commands)

    timer.service.handle_each = failing_on_guilty  # what the consumer calls
    guilty = command("tenant-x", "guilty", ms=LATER)
    probe.send_many([command("tenant-a", "ok-a", ms=LATER), guilty, command("tenant-b", "ok-b", ms=LATER)])
    assert wait_until(
        lambda: _stored(timer, ("tenant-a", "ok-a"), ("tenant-b", "ok-b")), timeout=STORED_WITHIN
    )
    assert wait_until(lambda: len(probe.dead) == 1, timeout=5)
    raw, headers = probe.dead[0]
    assert raw == guilty.to_json()
    assert headers["Timer-Error-Code"] == "TIMER_INVALID_COMMAND" and "RuntimeError" in headers["Timer-Error"]
    assert wait_until(lambda: _settled(probe), timeout=5)
    assert _consumer(probe).num_redelivered == 0
    assert timer.queries.get("tenant-x", "guilty") is None


def test_a_store_error_on_one_command_refuses_only_that_command(nats_timer, probe):
    """The timer service itself: an exception from the store that is not the store being down
    (here a driver error on one row) refuses that command alone; the rest of the batch is stored."""
    timer = nats_timer()
    probe.listen()
    insert_many = timer.timers.insert_many

    def failing_on_guilty(tx, entries):
        if any(e.service_call_id == "guilty" for e in entries):
            raise UnicodeEncodeError("utf-8", "guilty", 0, 1, "cannot be encoded")
        return insert_many(tx, entries)

    timer.timers.insert_many = failing_on_guilty  # the service's store
    guilty = command("tenant-x", "guilty", ms=LATER)
    probe.send_many([command("tenant-a", "ok-a", ms=LATER), guilty, command("tenant-b", "ok-b", ms=LATER)])
    assert wait_until(
        lambda: _stored(timer, ("tenant-a", "ok-a"), ("tenant-b", "ok-b")), timeout=STORED_WITHIN
    )
    assert wait_until(lambda: len(probe.dead) == 1, timeout=5)
    raw, headers = probe.dead[0]
    assert raw == guilty.to_json()
    assert (
        headers["Timer-Error-Code"] == "TIMER_INVALID_COMMAND"
        and "UnicodeEncodeError" in headers["Timer-Error"]
    )
    assert wait_until(lambda: _settled(probe), timeout=5)
    assert _consumer(probe).num_redelivered == 0
    assert timer.metrics.count("timer.commands.rejected") == 1


def test_redelivery_after_store_failures_is_capped_then_dead_lettered(nats_timer, probe):
    """The store keeps failing on one command: the batch is redelivered (1 s, then 2 s later) up
    to max_deliver; at the last delivery each command is tried alone, so the others are stored
    and the one the store keeps failing on is dead-lettered with the store's error code.

    nats-server 2.9 sometimes answers a delayed nak by delivering one message twice in place of
    another, and counts the lost one delivered: that one comes back only after ack_wait (3 s
    here), as its next delivery. So the others are looked for within ack_wait of the dead-letter,
    the batches the store saw are not counted exactly, and the dead-letter may name the server's
    count of 4 deliveries when the third was one of those the timer never saw."""
    timer = nats_timer(max_deliver=3, ack_wait=3.0)
    probe.listen()
    persist = timer.service.handle_each
    deliveries = []

    def failing_on_stuck(commands):
        if any(c.service_call_id == "stuck" for c in commands):
            deliveries.append(len(commands))
            raise StoreUnavailable("the job store rejected a write")
        return persist(commands)

    timer.service.handle_each = failing_on_stuck
    stuck = command("tenant-x", "stuck", ms=LATER)
    probe.send_many([command("tenant-a", "ok-a", ms=LATER), stuck, command("tenant-b", "ok-b", ms=LATER)])
    assert wait_until(lambda: len(probe.dead) == 1, timeout=15)
    raw, headers = probe.dead[0]
    assert raw == stuck.to_json()
    assert headers["Timer-Error-Code"] == "SCHEDULE_STORE_UNAVAILABLE"
    # the server's count: 3, or more when a delivery it counted never reached the timer (above)
    counted = re.search(r"after (\d+) deliveries", headers["Timer-Error"])
    assert counted is not None and 3 <= int(counted[1]) <= 3 + SPARE_DELIVERIES, headers["Timer-Error"]
    assert wait_until(lambda: _stored(timer, ("tenant-a", "ok-a"), ("tenant-b", "ok-b")), timeout=8)
    assert timer.queries.get("tenant-x", "stuck") is None
    assert wait_until(lambda: _settled(probe), timeout=5)
    info = _consumer(probe)
    assert info.config.max_deliver == 3 + SPARE_DELIVERIES and info.config.ack_wait == 3.0
    # 3 deliveries, the last one tried alone (a batch of several is retried one by one first); a
    # delivery the server counted but never handed over (above) reaches the store as none
    assert 2 <= len(deliveries) <= 4 and deliveries[-1] == 1, deliveries
    assert len(probe.dead) == 1


def test_a_delivery_the_server_counted_but_never_handed_over_loses_nothing(nats_timer, probe):
    """Deliveries the server counts without the timer having seen them (here taken by another
    client of the same durable consumer and never acked) do not use up the timer's own cap: the
    server's max_deliver keeps spare deliveries, so the command still comes back and is stored."""
    from nats.js.api import AckPolicy, ConsumerConfig

    probe.ensure_streams()
    names = probe.names
    config = ConsumerConfig(  # as the timer creates it
        durable_name=names["consumer"],
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=1.0,
        max_deliver=2 + SPARE_DELIVERIES,
        filter_subject=names["command_subject"],
    )
    probe.nats.run(probe.nats.js.add_consumer(names["command_stream"], config=config), 5)
    probe.send(command("tenant-a", "astray", ms=LATER))

    async def take_and_drop() -> int:
        subscription = await probe.nats.js.pull_subscribe(
            names["command_subject"], durable=names["consumer"], stream=names["command_stream"]
        )
        (message,) = await subscription.fetch(1, timeout=5)
        await message.nak()  # counted by the server; nothing reached the timer
        await subscription.unsubscribe()
        return int(message.metadata.num_delivered)

    assert [probe.nats.run(take_and_drop(), 10) for _ in range(2)] == [1, 2]  # the timer's cap is 2
    timer = nats_timer(max_deliver=2, ack_wait=1.0)
    assert wait_until(lambda: _stored(timer, ("tenant-a", "astray")), timeout=STORED_WITHIN + 3)
    assert wait_until(lambda: _settled(probe), timeout=5)
    assert probe.dead == []


def test_an_existing_consumer_that_redelivered_forever_gets_the_cap(nats_timer, probe):
    """A durable consumer created with max_deliver=-1 (by an earlier release) is updated at start."""
    from nats.js.api import AckPolicy, ConsumerConfig

    probe.ensure_streams()
    names = probe.names
    old = ConsumerConfig(
        durable_name=names["consumer"],
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=30.0,
        max_deliver=-1,
        filter_subject=names["command_subject"],
    )
    probe.nats.run(probe.nats.js.add_consumer(names["command_stream"], config=old), 5)
    assert _consumer(probe).config.max_deliver == -1
    timer = nats_timer()
    assert timer.settings.max_deliver == 20
    assert _consumer(probe).config.max_deliver == 20 + SPARE_DELIVERIES
    probe.listen()
    probe.send(command("tenant-a", "ok-a", ms=LATER))
    assert wait_until(lambda: _stored(timer, ("tenant-a", "ok-a")), timeout=5)


def test_redelivery_delays_double_up_to_a_cap_and_max_deliver_is_a_setting():
    from schedule_sdk.adapters.brokers.nats import MAX_NAK_DELAY, _nak_delay
    from schedule_sdk.domain.errors import InvalidSetting

    assert [_nak_delay(n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert _nak_delay(10**6) == MAX_NAK_DELAY  # a consumer that redelivered forever before
    assert TimerSettings.load({}, environ={"TIMER_MAX_DELIVER": "5"}).max_deliver == 5
    with pytest.raises(InvalidSetting, match="max_deliver"):
        TimerSettings.load({"max_deliver": 0}, environ={})
    assert TimerSettings.load({}, environ={"TIMER_ACK_WAIT": "2.5"}).ack_wait == 2.5
    with pytest.raises(InvalidSetting, match="ack_wait"):
        TimerSettings.load({"ack_wait": 0}, environ={})


def _command_source(probe):
    from schedule_sdk.adapters.brokers.nats import JetStreamCommandSource, NatsLoop
    from schedule_sdk.testing.contracts.brokers import RecordingSink

    probe.ensure_streams()
    names = probe.names
    loop = NatsLoop(names["broker_url"], name="timer-test-stop").connect()
    source = JetStreamCommandSource(
        loop, stream=names["command_stream"], subject=names["command_subject"], durable=names["consumer"]
    )
    sink = RecordingSink()
    source.start(sink)
    return loop, source, sink


def test_the_command_source_stops_within_one_fetch_and_acks_what_that_fetch_brought(probe):
    loop, source, sink = _command_source(probe)
    try:
        probe.send(command("tenant-a", "before-stop", ms=LATER))
        assert wait_until(lambda: len(sink.handled) == 1, timeout=5)
        source.stop()
        assert _settled(probe)  # acked: nothing pending or waiting for an ack after the stop
        assert [c.service_call_id for c in sink.handled] == ["before-stop"]
    finally:
        loop.close()


def test_the_command_source_stops_cleanly_when_its_nats_loop_was_closed_first(probe, caplog):
    loop, source, _ = _command_source(probe)
    loop.close()  # ends the consumer task, which a stopped loop would otherwise strand
    with caplog.at_level(logging.WARNING):
        source.stop()  # would wait its 10 s bound and log the timeout if the task were stranded
    assert "command consumer stopped" not in caplog.text
