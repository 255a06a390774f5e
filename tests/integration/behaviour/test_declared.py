"""Schedules declared in code, on every store x substrate: declared, synced, fired; a deploy
that changes them switches without an occurrence twice or lost; dropped ones are pruned and
runtime jobs are never touched; older code beside newer code never flaps; a pause survives."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    IntervalRepeat,
    InvalidDeclaration,
    JobStatus,
    OneShotSpec,
    Plan,
    RepeatSpec,
    ScheduleArrivedEvent,
    every,
)
from schedule_sdk.adapters.clock import SystemClock
from schedule_sdk.contrib.fastapi import running_schedules, schedules_lifespan
from schedule_sdk.domain import timing
from schedule_sdk.testing import kit_container
from tests.conftest import Backend
from tests.harness import Harness
from tests.support import declared_v1
from tests.support.waiting import wait_until

#: One writer of the declared set at a time: on the pooled and Sentinel backends too.
pytestmark = pytest.mark.every_backend


V1 = "tests.support.declared_v1"
V2 = "tests.support.declared_v2"


def app(backend: Backend, module: str, **settings: object) -> Harness:
    return backend.harness(listener_modules=[module], **settings)


class Unbuildable:
    """A declared method of a class no container provides."""

    @every(timedelta(minutes=1), name="tests.unbuildable")
    def run(self, event: ScheduleArrivedEvent) -> None:
        raise AssertionError("never fires")


def open_jobs(h: Harness, topic: str) -> list:
    return h.service.list(topic=topic, status=["pending", "active", "paused"], limit=50).items


def by_name(plan: Plan) -> dict[str, str]:
    return {i.name: i.action for i in plan.items}


def test_declared_schedules_are_created_once_and_fire_their_function(backend):
    declared_v1.received.clear()
    h = app(backend, V1)
    assert by_name(h.container.declared_sync().plan()) == dict.fromkeys(
        ["app.cleanup", "app.report", "app.tick", "app.warmup"], "add"
    )
    h.start()
    tick = open_jobs(h, "app.tick")
    assert len(tick) == 1
    events = h.wait_events(tick[0].id, 2)
    assert all(e.user_payload == {"v": 1} for e in events)
    assert [e.scheduled_job_id for e in declared_v1.received if e.topic == "app.tick"][:2] == [tick[0].id] * 2
    report = open_jobs(h, "app.report")[0]
    berlin = report.run_at.astimezone(timing.zone("Europe/Berlin"))
    assert (berlin.hour, berlin.minute) == (9, 0) and berlin.weekday() < 5
    # a second start (another process of the same code) writes nothing
    again = h.container.declared_sync().apply()
    assert again.rows_written == 0 and set(by_name(again).values()) == {"unchanged"}
    assert len(open_jobs(h, "app.tick")) == 1


def test_a_changed_declaration_switches_with_no_occurrence_twice_or_lost(backend):
    old = app(backend, V1).start()
    first = open_jobs(old, "app.tick")[0]
    old.wait_events(first.id, 2)
    new = app(backend, V2)
    switch = datetime.now(UTC)
    applied = new.container.declared_sync().apply()
    after_switch = datetime.now(UTC)
    assert by_name(applied)["app.tick"] == "change" and by_name(applied)["app.report"] == "change"
    assert by_name(applied)["app.warmup"] == "unchanged"
    replaced = open_jobs(new, "app.tick")
    assert len(replaced) == 1 and replaced[0].id != first.id
    assert replaced[0].repeat == IntervalRepeat(every_ms=1100)
    new.start()
    # both workers run now: either may fire the new job's occurrences
    fired = lambda: old.events_for(replaced[0].id) + new.events_for(replaced[0].id)  # noqa: E731
    assert wait_until(lambda: len(fired()) >= 2, 60), f"the new job fired {len(fired())} time(s)"
    old.stop()
    new.stop()
    fires = [e for e in old.events + new.events if e.topic == "app.tick"]
    v1 = [e for e in fires if e.user_payload == {"v": 1}]
    v2 = [e for e in fires if e.user_payload == {"v": 2}]
    assert v1 and v2 and len(v1) + len(v2) == len(fires)
    assert all(e.scheduled_for <= after_switch for e in v1)
    assert all(e.scheduled_for > switch for e in v2)
    # every fire once: no (job, occurrence) and no due instant twice, across both workers
    keys = Counter((e.scheduled_job_id, e.occurrence) for e in fires)
    assert max(keys.values()) == 1
    assert max(Counter(e.scheduled_for for e in fires).values()) == 1
    # v2's fires are on its own 1.1 s grid, continuing the old job's grid
    dues = sorted(e.scheduled_for for e in v2)
    assert all((b - a) == timedelta(milliseconds=1100) for a, b in zip(dues, dues[1:], strict=False))
    assert new.job(first.id).status is JobStatus.CANCELLED
    report = open_jobs(new, "app.report")[0]
    local = report.run_at.astimezone(timing.zone("Europe/Berlin"))
    assert (local.hour, local.minute) == (10, 30) and report.payload == {"v": 2}


def test_a_dropped_declaration_is_pruned_and_runtime_jobs_are_untouched(backend):
    old = app(backend, V1)
    old.container.declared_sync().apply()
    cleanup = open_jobs(old, "app.cleanup")[0]
    runtime = old.service.schedule_repeat(
        RepeatSpec(topic="app.cleanup", timezone="UTC", repeat=IntervalRepeat(every_ms=3_600_000))
    )
    other = old.service.schedule_at(
        OneShotSpec(topic="runtime.job", run_at=datetime.now(UTC) + timedelta(hours=1), timezone="UTC")
    )
    kept = app(backend, V2, declared_prune=False).container.declared_sync().apply()
    assert by_name(kept)["app.cleanup"] == "keep"
    assert old.job(cleanup.id).status is JobStatus.PENDING
    pruned = app(backend, V2).container.declared_sync().apply()
    assert by_name(pruned)["app.cleanup"] == "remove"
    assert old.job(cleanup.id).status is JobStatus.CANCELLED
    assert old.job(runtime.id).status is JobStatus.PENDING
    assert old.job(other.id).status is JobStatus.PENDING
    assert open_jobs(old, "app.audit")
    # pruned once: the next sync does not mention it again
    assert "app.cleanup" not in by_name(app(backend, V2).container.declared_sync().apply())


def test_older_code_beside_newer_code_does_not_flap(backend):
    v2 = app(backend, V2, declared_version=2)
    assert v2.container.declared_sync().apply().rows_written > 0
    tick = open_jobs(v2, "app.tick")[0]
    v1 = app(backend, V1, declared_version=1)
    plan = v1.container.declared_sync().plan()
    assert by_name(plan)["app.tick"] == "stale" and by_name(plan)["app.cleanup"] == "stale"
    stale = v1.container.declared_sync().apply()
    assert stale.rows_written == 0
    assert open_jobs(v2, "app.tick")[0].id == tick.id and tick.payload == {"v": 2}
    assert not open_jobs(v2, "app.cleanup")
    again = app(backend, V2, declared_version=2).container.declared_sync().apply()
    assert again.rows_written == 0
    assert open_jobs(v2, "app.tick")[0].id == tick.id
    # a newer version (v3 = v1's code) wins
    v3 = app(backend, V1, declared_version=3).container.declared_sync().apply()
    assert by_name(v3)["app.tick"] == "change" and by_name(v3)["app.cleanup"] == "add"
    assert open_jobs(v2, "app.tick")[0].payload == {"v": 1}


def test_a_paused_declared_schedule_stays_paused_across_syncs(backend):
    h = app(backend, V1)
    h.container.declared_sync().apply()
    report = open_jobs(h, "app.report")[0]
    h.service.pause(report.id)
    assert app(backend, V1).container.declared_sync().apply().rows_written == 0
    assert h.job(report.id).status is JobStatus.PAUSED
    changed = app(backend, V2).container.declared_sync().apply()
    item = next(i for i in changed.items if i.name == "app.report")
    assert item.action == "change" and item.paused
    moved = open_jobs(h, "app.report")
    assert [j.status for j in moved] == [JobStatus.PAUSED] and moved[0].id != report.id
    h.service.resume(moved[0].id)
    assert h.job(moved[0].id).status is JobStatus.PENDING


def test_an_after_declaration_runs_once_whatever_later_syncs_do(backend):
    h = app(backend, V1)
    h.container.declared_sync().apply()
    warmup = open_jobs(h, "app.warmup")[0]
    assert warmup.repeat is None
    assert timedelta(hours=23) < warmup.run_at - datetime.now(UTC) <= timedelta(days=1)
    h.service.cancel(warmup.id)  # as if it had run
    again = app(backend, V1).container.declared_sync().apply()
    assert by_name(again)["app.warmup"] == "unchanged"
    assert not open_jobs(h, "app.warmup")


def test_a_kit_container_that_declares_schedules_starts_a_worker_that_fires_them():
    """The testing kit's in-memory store keeps the declarations: a worker syncs them at start."""
    declared_v1.received.clear()
    container = kit_container(clock=SystemClock())
    container.declared_schedules().register(declared_v1.tick)
    with container.worker():
        [(row, owned)] = container.declared_rows().read()
        assert row.name == "app.tick" and owned is not None
        wait_until(lambda: len(declared_v1.received) >= 2, 20)
    assert {e.scheduled_job_id for e in declared_v1.received} == {row.job_id}
    assert container.declared_sync().apply().rows_written == 0


def test_the_fastapi_lifespan_helper_syncs_only_when_asked_not_to_run_a_worker():
    """``schedules_lifespan(..., worker=False)``: binds, syncs once at start, runs no worker."""
    container = kit_container()
    lifespan = schedules_lifespan(container, declare=[declared_v1.tick, declared_v1.report], worker=False)

    async def serve() -> None:
        async with lifespan(object()):
            assert [row.name for row, _ in container.declared_rows().read()] == ["app.report", "app.tick"]

    asyncio.run(serve())
    asyncio.run(serve())  # a second start of the app: registering again is harmless, nothing written
    assert container.declared_sync().plan().has_changes is False
    assert not container.worker().running


def test_the_fastapi_lifespan_helper_fails_on_a_bad_declaration_before_anything_runs():
    container = kit_container()

    async def serve() -> None:
        async with running_schedules(container, declare=[Unbuildable]):
            raise AssertionError("the app must not serve")

    with pytest.raises(InvalidDeclaration, match="Unbuildable"):
        asyncio.run(serve())
    assert container.declared_rows().read() == []


def test_adding_an_overlap_policy_to_a_declaration_switches_its_job_and_a_second_sync_writes_nothing(backend):
    old = app(backend, "tests.support.declared_overlap_v1")
    old.container.declared_sync().apply()
    [before] = open_jobs(old, "app.export")
    assert before.overlap is None
    new = app(backend, "tests.support.declared_overlap_v2")
    assert by_name(new.container.declared_sync().plan()) == {"app.export": "change"}
    new.container.declared_sync().apply()
    [after] = open_jobs(new, "app.export")
    assert after.id != before.id and after.overlap == "skip" and after.rescheduled_from == before.id
    assert after.run_at == before.run_at  # the same grid: no occurrence twice or lost
    assert new.container.declared_sync().apply().rows_written == 0
