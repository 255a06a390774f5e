"""Timer semantics in-process, on SQLite and PostgreSQL: idempotency, moving, Reached is final,
correlation ids, tenant isolation, retries on a failing bus, healing, the read model, metrics."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from schedule_sdk.domain.errors import InvalidTimerCommand
from schedule_sdk.timer import PrometheusMetrics, ScheduleTimer, TimerOutcome, TimerState
from tests.support.timer_fixtures import Received, command, due_in
from tests.support.waiting import wait_until


def started(make_timer, **overrides):
    timer = make_timer(**overrides)
    received = Received()
    timer.bus.subscribe(received)
    timer.start()
    return timer, received


def test_schedule_fires_once_at_or_after_due_time(make_timer):
    timer, received = started(make_timer)
    cmd = command(ms=300, correlation_id="corr-1")
    assert timer.schedule(cmd) is TimerOutcome.CREATED
    entry = timer.queries.get("tenant-a", "sc-1")
    assert entry is not None and entry.state is TimerState.SCHEDULED and entry.reached_at is None
    assert entry.due_at == cmd.due_at and entry.correlation_id == "corr-1"
    assert wait_until(lambda: received.keys() == [("tenant-a", "sc-1")])
    envelope = received.envelopes[0]
    assert envelope.payload.reached_at >= cmd.due_at
    assert (envelope.correlation_id, envelope.causation_id, envelope.aggregate_id) == ("corr-1", None, "sc-1")
    assert wait_until(lambda: timer.queries.get("tenant-a", "sc-1").state is TimerState.REACHED)
    entry = timer.queries.get("tenant-a", "sc-1")
    assert entry.reached_at == envelope.payload.reached_at
    received.settle(timer)
    assert len(received.envelopes) == 1
    # the settle marker was a command and a fire too; a fire is counted after its publish, which
    # the marker's arrival shows, so the count may follow a moment later
    assert wait_until(lambda: timer.metrics.count("timer.schedules.processed") >= 2)
    assert timer.metrics.count("timer.schedules.processed") == 2
    assert timer.metrics.count("timer.commands.received") == 2


def test_a_due_time_in_the_past_fires_at_once(make_timer):
    timer, received = started(make_timer)
    timer.schedule(command(ms=-60_000))
    assert wait_until(lambda: len(received.envelopes) == 1, timeout=5)


def test_duplicate_while_scheduled_moves_the_due_time_later(make_timer):
    timer, received = started(make_timer)
    # The duplicates must reach the timer while the first is still Scheduled. A loaded machine can
    # take longer than the lead: then the first was Reached (the move is IGNORED, and the stored
    # timer shows why) and the test goes again with a new timer and twice the lead.
    for lead in (1000, 2000, 4000, 8000, 16000):
        call = f"sc-{lead}"
        first = command(call=call, ms=lead)
        assert timer.schedule(first) is TimerOutcome.CREATED
        again = timer.schedule(first)
        later = ScheduleTimer(
            tenant_id="tenant-a", service_call_id=call, due_at=first.due_at + timedelta(seconds=1)
        )
        moved = timer.schedule(later) if again is TimerOutcome.UNCHANGED else again
        if moved is TimerOutcome.MOVED:
            break
        assert moved is TimerOutcome.IGNORED, moved
        assert timer.queries.get("tenant-a", call).state is TimerState.REACHED
    else:
        raise AssertionError("every first timer was Reached before its duplicates came")
    assert timer.queries.get("tenant-a", call).due_at == later.due_at
    mine = lambda: [e for e in received.envelopes if e.aggregate_id == call]  # noqa: E731
    assert wait_until(mine)
    assert mine()[0].payload.reached_at >= later.due_at  # not at the old time
    received.settle(timer)
    assert len(mine()) == 1


def test_duplicate_while_scheduled_moves_the_due_time_earlier(make_timer):
    timer, received = started(make_timer)
    timer.schedule(command(ms=60_000))
    earlier = command(ms=200)
    assert timer.schedule(earlier) is TimerOutcome.MOVED
    assert wait_until(lambda: received.envelopes, timeout=5)
    assert received.envelopes[0].payload.reached_at >= earlier.due_at
    # publish, then mark Reached: the mark follows the envelope
    assert wait_until(lambda: timer.queries.get("tenant-a", "sc-1").state is TimerState.REACHED, timeout=5)


def test_duplicate_once_reached_is_ignored(make_timer):
    timer, received = started(make_timer)
    timer.schedule(command(ms=50))
    assert wait_until(lambda: timer.queries.get("tenant-a", "sc-1").state is TimerState.REACHED)
    before = timer.queries.get("tenant-a", "sc-1")
    ignored = command(ms=200, correlation_id="other")
    assert timer.schedule(ignored) is TimerOutcome.IGNORED
    assert timer.queries.get("tenant-a", "sc-1") == before
    assert wait_until(lambda: datetime.now(UTC) > ignored.due_at)  # it would have fallen due by now
    received.settle(timer)
    assert len(received.envelopes) == 1


def test_correlation_id_is_generated_when_absent_and_queryable(make_timer):
    timer = make_timer()
    timer.schedule(command(call="sc-1", ms=60_000))
    generated = timer.queries.get("tenant-a", "sc-1").correlation_id
    assert len(generated) == 36 and generated[14] == "7"  # a UUIDv7
    for call in ("sc-2", "sc-3"):
        timer.schedule(command(call=call, ms=60_000, correlation_id="trace-9"))
    timer.schedule(command("tenant-b", "sc-4", ms=60_000, correlation_id="trace-9"))
    assert [e.service_call_id for e in timer.queries.by_correlation("tenant-a", "trace-9")] == [
        "sc-2",
        "sc-3",
    ]
    assert [e.service_call_id for e in timer.queries.by_correlation("tenant-b", "trace-9")] == ["sc-4"]


def test_tenant_a_can_never_read_move_or_see_tenant_b_timers(make_timer):
    timer, received = started(make_timer)
    # B's timer is due after every check below has run, however loaded the machine (at 600 ms
    # it once fired before the last of them in CI, and find_due no longer listed it)
    b_cmd = command("tenant-b", "shared-id", ms=3_000)
    timer.schedule(b_cmd)
    # read: tenant A does not see B's timer, though the serviceCallId is the same
    assert timer.queries.get("tenant-a", "shared-id") is None
    assert timer.timers.find_due("tenant-a", due_in(10_000)) == []
    assert (
        timer.queries.by_correlation("tenant-a", timer.queries.get("tenant-b", "shared-id").correlation_id)
        == []
    )
    # move: the same serviceCallId from tenant A creates A's own timer, B's is untouched
    a_cmd = command("tenant-a", "shared-id", ms=100)
    assert timer.schedule(a_cmd) is TimerOutcome.CREATED
    assert timer.queries.get("tenant-b", "shared-id").due_at == b_cmd.due_at
    assert [e.tenant_id for e in timer.timers.find_due("tenant-b", due_in(10_000))] == ["tenant-b"]
    # see: each tenant's event carries its own tenant and fires at its own time
    assert wait_until(lambda: len(received.envelopes) == 2, timeout=15)
    first, second = received.envelopes
    assert (first.tenant_id, second.tenant_id) == ("tenant-a", "tenant-b")
    assert second.payload.reached_at >= b_cmd.due_at


def test_a_failing_bus_fails_the_fire_and_the_core_retries_it(make_timer):
    timer = make_timer()
    attempts: list[float] = []

    def flaky(envelope):
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise ConnectionError("broker down")

    timer.bus.subscribe(flaky)
    timer.start()
    timer.schedule(command(ms=50))
    assert wait_until(lambda: timer.queries.get("tenant-a", "sc-1").state is TimerState.REACHED, timeout=10)
    assert len(attempts) == 3  # published until it was accepted, then marked Reached
    assert timer.metrics.count("schedule.jobs.retried") == 2


def test_heal_arms_a_scheduled_timer_that_lost_its_job(make_timer):
    timer = make_timer()
    timer.schedule(command(ms=100))
    with timer.engine.begin() as conn:  # e.g. its job exhausted its retries
        conn.execute(sa.text("UPDATE schedule_jobs SET status = 'failed'"))
    assert [e.service_call_id for e in timer.timers.unarmed("timer.due", 10)] == ["sc-1"]
    received = Received()
    timer.bus.subscribe(received)
    timer.start()  # heals at start
    assert wait_until(lambda: len(received.envelopes) == 1, timeout=5)
    assert timer.timers.unarmed("timer.due", 10) == []


def test_concurrent_commands_for_one_timer_leave_one_row_and_one_event(make_timer):
    timer, received = started(make_timer)
    due = due_in(500)
    errors: list[BaseException] = []

    def send():
        try:
            timer.schedule(ScheduleTimer(tenant_id="tenant-a", service_call_id="race", due_at=due))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert wait_until(lambda: len(received.envelopes) == 1, timeout=5)
    received.settle(timer)
    assert len(received.envelopes) == 1


def test_in_process_command_source_validates_and_counts(make_timer):
    timer = make_timer()
    timer.start()
    assert timer.source.send(command(ms=60_000).to_json()) is TimerOutcome.CREATED
    with pytest.raises(InvalidTimerCommand):
        timer.source.send(b'{"tenantId": "", "serviceCallId": "x", "dueAt": "2026-01-01T00:00:00Z"}')
    assert timer.metrics.count("timer.commands.received") == 2
    assert timer.metrics.count("timer.commands.rejected") == 1
    assert timer.queries.get("", "x") is None


def test_prometheus_exposition_names(make_timer):
    metrics = PrometheusMetrics()
    timer = make_timer(metrics=metrics)
    timer.bus.subscribe(lambda e: None)
    timer.start()
    timer.schedule(command(ms=50))
    assert wait_until(lambda: timer.queries.get("tenant-a", "sc-1").state is TimerState.REACHED)
    text = metrics.exposition().decode()
    assert "timer_commands_received_total 1.0" in text
    assert "timer_schedules_processed_total 1.0" in text
    assert "timer_polling_duration_seconds_count 1.0" in text
    assert 'schedule_jobs_fired_total{outcome="completed",topic="timer.due"} 1.0' in text
