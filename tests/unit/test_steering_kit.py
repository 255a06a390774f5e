"""pause / resume / trigger and the misfire policies, on the test kit (fake clock, memory store).

Expected instants are written out by hand from the rules in MisfirePolicy's docstring, not
computed with the code under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    SCHEDULE_MISSED_EVENT,
    CronRepeat,
    IntervalRepeat,
    InvalidMisfire,
    JobFinished,
    JobNotFound,
    JobStatus,
    ListenerRegistry,
    MisfirePolicy,
    NotTriggerable,
    OneShotSpec,
    RepeatSpec,
    schedule_missed_event_name,
)
from schedule_sdk.testing import make_test_kit

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
MISSING = "01900000-0000-7000-8000-00000000dead"


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def every_minute(**changes: object) -> RepeatSpec:
    values: dict[str, object] = {
        "topic": "t.tick",
        "timezone": "UTC",
        "repeat": IntervalRepeat(every_ms=60_000),
    }
    values.update(changes)
    return RepeatSpec(**values)  # type: ignore[arg-type]


def fired(kit, job_id):
    return [(e.occurrence, e.scheduled_for) for e in kit.publisher.events_for(job_id)]


# -- pause / resume ------------------------------------------------------------------------------


def test_a_paused_job_never_fires_and_resume_fires_it_once_with_fire_once():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_minute())  # due 12:01, 12:02, ...
    assert kit.service.pause(job.id).status is JobStatus.PAUSED
    kit.run_due(until=minutes(10.5))  # 12:10:30
    assert kit.events == [] and kit.job(job.id).status is JobStatus.PAUSED
    kit.service.resume(job.id)
    kit.run_due()
    # one catch-up fire for 12:01; 12:02 .. 12:10 are coalesced into it and reported
    assert fired(kit, job.id) == [(1, T0 + minutes(1))]
    [missed] = kit.publisher.missed
    assert missed.missed == tuple(T0 + minutes(m) for m in range(2, 11)) and missed.count == 9
    assert missed.policy == "fire_once" and missed.scheduled_job_id == job.id
    assert kit.job(job.id).scheduled_for == T0 + minutes(11)
    kit.run_due(until=minutes(0.5))  # 12:11
    assert fired(kit, job.id)[-1] == (2, T0 + minutes(11))


def test_pause_and_resume_are_idempotent_and_write_nothing_when_repeated():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_minute())
    first = kit.service.pause(job.id)
    kit.clock.advance(5)
    assert kit.service.pause(job.id) == first == kit.job(job.id)  # updated_at unchanged
    resumed = kit.service.resume(job.id)
    kit.clock.advance(5)
    assert kit.service.resume(job.id) == resumed == kit.job(job.id)
    assert resumed.status is JobStatus.PENDING


@pytest.mark.parametrize("action", ["pause", "resume", "trigger"])
def test_unknown_ids_and_finished_jobs_are_refused_and_nothing_is_written(action):
    kit = make_test_kit(start=T0)
    with pytest.raises(JobNotFound):
        getattr(kit.service, action)(MISSING)
    job = kit.service.schedule_at(OneShotSpec(topic="t.one", run_at=T0 + minutes(1), timezone="UTC"))
    kit.service.cancel(job.id)
    before = kit.job(job.id)
    with pytest.raises(JobFinished) as refused:
        getattr(kit.service, action)(job.id)
    assert refused.value.code == "SCHEDULE_JOB_FINISHED" and refused.value.status == "cancelled"
    assert kit.job(job.id) == before


def test_a_paused_job_can_be_cancelled_and_rescheduled():
    kit = make_test_kit(start=T0)
    a = kit.service.schedule_repeat(every_minute())
    b = kit.service.schedule_repeat(every_minute())
    kit.service.pause(a.id)
    kit.service.pause(b.id)
    kit.service.cancel(a.id)
    assert kit.job(a.id).status is JobStatus.CANCELLED
    new = kit.service.reschedule(b.id, every_minute(topic="t.other"))
    assert kit.job(b.id).status is JobStatus.CANCELLED and kit.job(new.id).status is JobStatus.PENDING


def test_a_one_shot_resumed_after_its_run_at_fires_late_once():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_at(OneShotSpec(topic="t.one", run_at=T0 + minutes(1), timezone="UTC"))
    kit.service.pause(job.id)
    kit.run_due(until=minutes(30))
    kit.service.resume(job.id)
    kit.run_due()
    assert fired(kit, job.id) == [(1, T0 + minutes(1))]
    assert kit.job(job.id).status is JobStatus.COMPLETED and kit.publisher.missed == []


# -- misfire policies ----------------------------------------------------------------------------


def test_skip_drops_missed_occurrences_and_names_them():
    registry = ListenerRegistry()
    seen: list[object] = []
    registry.connect(SCHEDULE_MISSED_EVENT, seen.append)
    registry.connect(schedule_missed_event_name("t.tick"), seen.append)
    kit = make_test_kit(registry, start=T0)
    job = kit.service.schedule_repeat(every_minute(misfire=MisfirePolicy(mode="skip", grace_ms=90_000)))
    kit.service.pause(job.id)
    kit.clock.set(T0 + minutes(5.5))  # 12:05:30: 12:01 .. 12:03 are more than 90 s late; 12:04 and 12:05 not
    kit.service.resume(job.id)
    kit.run_due()
    assert fired(kit, job.id) == [(2, T0 + minutes(4)), (3, T0 + minutes(5))]
    [missed] = kit.publisher.missed
    assert missed.missed == (T0 + minutes(1), T0 + minutes(2), T0 + minutes(3)) and missed.count == 3
    assert seen == [missed, missed]  # both names
    assert missed.dedup_key == f"{job.id}:missed:{(T0 + minutes(1)).isoformat()}"
    assert kit.job(job.id).occurrence_count == 2  # limit counts fires only


def test_skip_completes_a_missed_one_shot_without_firing_it():
    kit = make_test_kit(start=T0)
    spec = OneShotSpec(
        topic="t.one",
        run_at=T0 + minutes(1),
        timezone="UTC",
        misfire=MisfirePolicy(mode="skip", grace_ms=1000),
    )
    job = kit.service.schedule_at(spec)
    kit.service.pause(job.id)
    kit.clock.set(T0 + minutes(2))
    kit.service.resume(job.id)
    kit.run_due()
    assert kit.events == []
    done = kit.job(job.id)
    assert done.status is JobStatus.COMPLETED and done.last_fired_at is None and done.occurrence_count == 0
    assert [m.missed for m in kit.publisher.missed] == [(T0 + minutes(1),)]


def test_fire_all_fires_every_missed_occurrence_in_turn_up_to_its_cap():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_minute(misfire=MisfirePolicy(mode="fire_all", max_catch_up=3)))
    kit.service.pause(job.id)
    kit.clock.set(T0 + minutes(6.5))  # 12:01 .. 12:06 overdue: six, cap three
    kit.service.resume(job.id)
    kit.run_due()
    assert [s for _, s in fired(kit, job.id)] == [T0 + minutes(m) for m in (4, 5, 6)]
    [missed] = kit.publisher.missed
    assert (
        missed.missed == (T0 + minutes(1), T0 + minutes(2), T0 + minutes(3)) and missed.policy == "fire_all"
    )
    assert kit.job(job.id).scheduled_for == T0 + minutes(7)


def test_fire_all_under_its_cap_misses_nothing_on_a_cron_schedule():
    kit = make_test_kit(start=T0)
    spec = every_minute(repeat=CronRepeat(expression="*/10 * * * *"), misfire=MisfirePolicy(mode="fire_all"))
    job = kit.service.schedule_repeat(spec)  # 12:10, 12:20, ...
    kit.service.pause(job.id)
    kit.clock.set(T0 + minutes(45))
    kit.service.resume(job.id)
    kit.run_due()
    assert [s for _, s in fired(kit, job.id)] == [T0 + minutes(m) for m in (10, 20, 30, 40)]
    assert kit.publisher.missed == []


def test_fire_all_cap_on_a_cron_schedule_keeps_the_latest():
    kit = make_test_kit(start=T0)
    spec = every_minute(
        repeat=CronRepeat(expression="* * * * *"), misfire=MisfirePolicy(mode="fire_all", max_catch_up=2)
    )
    job = kit.service.schedule_repeat(spec)  # every minute from 12:01
    kit.service.pause(job.id)
    kit.clock.set(T0 + minutes(600.5))  # ten hours: 600 overdue
    kit.service.resume(job.id)
    kit.run_due()
    assert [s for _, s in fired(kit, job.id)] == [T0 + minutes(599), T0 + minutes(600)]
    [missed] = kit.publisher.missed
    assert missed.count == 598 and missed.missed[0] == T0 + minutes(1) and len(missed.missed) == 100


def test_the_on_missed_hook_counts_every_missed_occurrence():
    kit = make_test_kit(start=T0)
    counted: list[tuple[str, int]] = []
    kit.firing.on_missed = lambda event: counted.append((event.topic, event.count))
    job = kit.service.schedule_repeat(every_minute())
    kit.service.pause(job.id)
    kit.clock.set(T0 + minutes(100.5))
    kit.service.resume(job.id)
    kit.run_due()
    assert counted == [("t.tick", 99)]


def test_a_failing_missed_listener_does_not_fail_the_fire():
    registry = ListenerRegistry()

    def broken(event):
        raise RuntimeError("missed listener")

    registry.connect(SCHEDULE_MISSED_EVENT, broken)
    kit = make_test_kit(registry, start=T0)
    job = kit.service.schedule_repeat(every_minute())
    kit.service.pause(job.id)
    kit.clock.set(T0 + minutes(3.5))
    kit.service.resume(job.id)
    kit.run_due()
    assert kit.job(job.id).occurrence == 2 and kit.job(job.id).last_error is None


@pytest.mark.parametrize(
    "kwargs",
    [{"mode": "later"}, {"grace_ms": -1}, {"grace_ms": 1.5}, {"max_catch_up": 0}, {"max_catch_up": 10_001}],
)
def test_an_invalid_misfire_policy_is_refused(kwargs):
    with pytest.raises(InvalidMisfire):
        MisfirePolicy(**kwargs)


def test_default_grace_depends_on_the_mode():
    assert MisfirePolicy().grace_ms == 0
    assert MisfirePolicy(mode="skip").grace_ms == 60_000
    assert MisfirePolicy(mode="skip", grace_ms=0).grace_ms == 0


# -- trigger -------------------------------------------------------------------------------------


def test_trigger_fires_a_one_shot_now_and_completes_it():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_at(OneShotSpec(topic="t.one", run_at=T0 + timedelta(hours=5), timezone="UTC"))
    kit.clock.advance(10)
    kit.service.trigger(job.id)
    kit.run_due()
    [event] = kit.publisher.events_for(job.id)
    assert (event.occurrence, event.scheduled_for) == (1, T0 + timedelta(seconds=10))
    assert kit.job(job.id).status is JobStatus.COMPLETED
    kit.run_due(until=timedelta(hours=6))
    assert len(kit.publisher.events_for(job.id)) == 1


def test_trigger_adds_one_extra_fire_and_the_repeating_schedule_is_unchanged():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_minute(limit=3))
    kit.run_due(until=minutes(1.25))  # 12:01 fired (occurrence 1); next 12:02
    kit.service.trigger(job.id)  # 12:01:15
    kit.run_due(until=minutes(3))  # until 12:04:15
    assert fired(kit, job.id) == [
        (1, T0 + minutes(1)),
        (2, T0 + minutes(1.25)),  # the extra fire
        (3, T0 + minutes(2)),
        (4, T0 + minutes(3)),
    ]
    keys = [e.dedup_key for e in kit.publisher.events_for(job.id)]
    assert len(set(keys)) == 4
    done = kit.job(job.id)
    assert done.status is JobStatus.COMPLETED and done.occurrence_count == 3  # the limit counts regular ones
    assert kit.publisher.missed == []


def test_trigger_keeps_the_grid_of_an_interval_job():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_minute())
    kit.clock.advance(17)
    kit.service.trigger(job.id)
    kit.run_due(until=minutes(2))
    assert [s for _, s in fired(kit, job.id)] == [
        T0 + timedelta(seconds=17),
        T0 + minutes(1),
        T0 + minutes(2),
    ]


def test_trigger_is_refused_when_paused_due_or_retrying():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_minute())
    kit.service.pause(job.id)
    with pytest.raises(NotTriggerable, match="paused"):
        kit.service.trigger(job.id)
    kit.service.resume(job.id)
    kit.service.trigger(job.id)
    with pytest.raises(NotTriggerable, match="already due") as refused:
        kit.service.trigger(job.id)  # the extra fire is pending
    assert refused.value.code == "SCHEDULE_NOT_TRIGGERABLE"
    before = kit.job(job.id)
    with pytest.raises(NotTriggerable):
        kit.service.trigger(job.id)
    assert kit.job(job.id) == before


# -- requeue ---------------------------------------------------------------------------------------


def test_requeue_resumes_a_failed_repeating_job_at_its_next_occurrence_and_refuses_ended_ones():
    from schedule_sdk.errors import NotRequeueable
    from schedule_sdk.ports import Guard

    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_minute(topic="t.tick"))
    with kit.store.transaction() as tx:  # a repeating job that failed (e.g. an older release)
        tx.update(job.evolve(status=JobStatus.FAILED), Guard(frozenset({JobStatus.PENDING})))
    kit.clock.set(T0 + minutes(10.5))
    resumed = kit.service.requeue(job.id)
    assert (resumed.status, resumed.run_at, resumed.occurrence) == (JobStatus.PENDING, T0 + minutes(11), 2)
    kit.run_due(minutes(1))
    assert [e.scheduled_for for e in kit.events] == [T0 + minutes(11)]
    kit.service.cancel(job.id)
    with pytest.raises(NotRequeueable, match="cancelled repeating job has ended"):
        kit.service.requeue(job.id)
    assert kit.job(job.id).status is JobStatus.CANCELLED
