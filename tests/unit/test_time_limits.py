"""Time limits on the test kit: which limit applies (the job's, its topic's, the default), how
limits are validated and configured, and what a fire past its limit leads to: ``timeout``, the
retry policy, a sync listener's thread counted as stuck until it returns (its late result
dropped), an ``async def`` listener cancelled."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    Backoff,
    FireOutcome,
    InvalidSetting,
    InvalidTimeLimit,
    ListenerRegistry,
    OneShotSpec,
    RetryPolicy,
    Settings,
    schedule_arrived_event_name,
)
from schedule_sdk.core.health import check_health
from schedule_sdk.domain.declared import Declaration
from schedule_sdk.domain.time_limits import TimeLimits, check_time_limit
from schedule_sdk.ports import WorkerInfo
from schedule_sdk.testing import FakeClock, make_test_kit

T0 = datetime(2030, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def test_a_jobs_own_limit_wins_then_its_topics_then_the_default():
    limits = TimeLimits(by_topic={"mail.send": 30 * MS}, default=5 * MS)
    assert limits.resolve(7 * MS, "mail.send") == 7 * MS
    assert limits.resolve(None, "mail.send") == 30 * MS
    assert limits.resolve(None, "other") == 5 * MS
    assert TimeLimits().resolve(None, "other") is None


def test_a_limit_is_kept_in_whole_milliseconds_from_1_ms_to_7_days():
    assert check_time_limit(timedelta(milliseconds=1500, microseconds=999)) == 1500 * MS
    assert check_time_limit(timedelta(days=7)) == timedelta(days=7)
    assert check_time_limit(None) is None
    for bad in (timedelta(0), timedelta(microseconds=999), timedelta(days=7, milliseconds=1), 5, "5s", True):
        with pytest.raises(InvalidTimeLimit):
            check_time_limit(bad)


def test_the_settings_take_topic_limits_as_text_or_a_mapping_and_refuse_bad_ones():
    text = Settings.load({"time_limits": "reports.build=10m, mail.send=30s,", "default_time_limit": "2"}, {})
    assert text.time_limit_defaults == TimeLimits(
        by_topic={"reports.build": timedelta(minutes=10), "mail.send": timedelta(seconds=30)},
        default=timedelta(seconds=2),
    )
    env = Settings.load(environ={"SCHEDULE_TIME_LIMITS": "a.b=0.25", "SCHEDULE_DEFAULT_TIME_LIMIT": "1h"})
    assert env.time_limit_defaults == TimeLimits(by_topic={"a.b": 250 * MS}, default=timedelta(hours=1))
    mapping = Settings.load({"time_limits": {"a.b": timedelta(seconds=3), "c": "4s"}}, {})
    assert mapping.time_limit_defaults.by_topic == {"a.b": timedelta(seconds=3), "c": timedelta(seconds=4)}
    for bad in (
        {"time_limits": "a.b"},
        {"time_limits": "a.b=ten"},
        {"time_limits": "bad topic!=1"},
        {"time_limits": "a.b=8d"},
        {"default_time_limit": "0"},
        {"max_stuck_listeners": 0},
    ):
        with pytest.raises(InvalidSetting):
            Settings.load(bad, {})


def test_a_declared_time_limit_is_part_of_the_spec_digest_only_when_set():
    plain = Declaration(name="app.tick", kind="every", topic="app.tick", every_ms=60_000)
    limited = Declaration(
        name="app.tick", kind="every", topic="app.tick", every_ms=60_000, time_limit=timedelta(seconds=5)
    )
    assert "time_limit_ms" not in plain.to_dict()  # digests stored before time limits still match
    assert limited.to_dict()["time_limit_ms"] == 5000 and limited.fingerprint != plain.fingerprint
    assert limited.spec(T0).time_limit == timedelta(seconds=5)
    with pytest.raises(InvalidTimeLimit):
        Declaration(name="x", kind="every", topic="x", every_ms=1000, time_limit=timedelta(0))


def _kit_with(listener, topic: str = "limits.unit"):
    registry = ListenerRegistry()
    registry.connect(schedule_arrived_event_name(topic), listener)
    kit = make_test_kit(registry, start=T0)
    return kit


def _due(topic: str = "limits.unit", **fields: object) -> OneShotSpec:
    return OneShotSpec(topic=topic, run_at=T0, timezone="UTC", **fields)  # type: ignore[arg-type]


def test_a_sync_listener_past_its_limit_is_a_timeout_retried_and_its_thread_is_stuck_until_it_returns():
    release, returned = threading.Event(), threading.Event()
    kit = _kit_with(lambda event: release.wait(10))
    kit.firing.overruns.on_unstuck = returned.set
    retry = RetryPolicy(attempts=2, backoff=Backoff(type="fixed", delay_ms=1000))
    job = kit.service.schedule_at(_due(time_limit=20 * MS, retry=retry))
    [result] = kit.run_due()
    assert result.fire is not None and result.fire.outcome is FireOutcome.TIMEOUT and result.fire.failed
    assert result.fire.error == "ListenerTimedOut: listeners ran past the fire's time limit of 20 ms"
    after = kit.job(job.id)
    assert (after.status.value, after.attempt) == ("pending", 2)  # the retry policy applies
    assert len(kit.firing.overruns.stuck()) == 1
    release.set()
    assert returned.wait(10)
    assert kit.firing.overruns.stuck() == []
    assert kit.job(job.id) == after  # the late return wrote nothing


def test_a_listener_within_its_limit_succeeds_and_leaves_no_thread_behind():
    kit = _kit_with(lambda event: None)
    job = kit.service.schedule_at(_due(time_limit=timedelta(seconds=10)))
    [result] = kit.run_due()
    assert result.fire is not None and result.fire.outcome is FireOutcome.SUCCEEDED
    assert kit.job(job.id).status.value == "completed" and kit.firing.overruns.stuck() == []


def test_an_async_listener_is_cancelled_at_the_limit_of_its_topic():
    cancelled = threading.Event()

    async def forever(event) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    kit = _kit_with(forever)
    kit.firing.time_limits = TimeLimits(by_topic={"limits.unit": 20 * MS})
    try:
        job = kit.service.schedule_at(_due())
        [result] = kit.run_due()
        assert result.fire is not None and result.fire.outcome is FireOutcome.TIMEOUT
        assert kit.job(job.id).status.value == "failed" and cancelled.wait(5)
        assert kit.firing.overruns.stuck() == []  # cancelled in time: no thread left behind
    finally:
        kit.registry.loop.close()


def test_a_worker_with_stuck_threads_is_reported_degraded_not_down():
    kit = make_test_kit(start=T0)
    row = WorkerInfo(id="w1", host="h", pid=1, substrate="sql", started_at=T0, last_beat=T0, stuck=2)
    kit.store.beat(row)
    clock = FakeClock(T0)
    report = check_health(store=kit.store, clock=clock, dead_after=10)
    [stuck] = [c for c in report.checks if c.name == "stuck"]
    assert stuck.ok and stuck.warning and "w1 (2)" in stuck.detail
    assert report.ok and report.degraded and report.as_dict()["degraded"] is True
    kit.store.beat(WorkerInfo(id="w1", host="h", pid=1, substrate="sql", started_at=T0, last_beat=T0))
    assert not check_health(store=kit.store, clock=clock, dead_after=10).degraded


def test_a_dispatcher_takes_no_new_fire_while_max_stuck_threads_are_stuck_and_is_woken_after():
    from schedule_sdk.core.dispatch import FireDispatcher

    release, woken = threading.Event(), threading.Event()
    kit = _kit_with(lambda event: release.wait(10))
    assert FireDispatcher(firing=kit.firing, store=kit.store, worker_id="w0", concurrency=3).max_stuck == 6
    dispatcher = FireDispatcher(
        firing=kit.firing, store=kit.store, worker_id="w1", concurrency=1, max_stuck=1
    )
    dispatcher.on_capacity = woken.set
    assert dispatcher.max_stuck == 1 and dispatcher.capacity() == 2000
    kit.service.schedule_at(_due(time_limit=20 * MS))
    kit.run_due()
    assert dispatcher.stuck() == 1 and dispatcher.capacity() == 0
    release.set()
    assert woken.wait(10)  # the stuck thread returned: the runner is told there is room again
    assert dispatcher.stuck() == 0 and dispatcher.capacity() == 2000
