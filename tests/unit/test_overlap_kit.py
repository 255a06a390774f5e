"""Overlap policies on the test kit (fake clock, memory store): a listener that "runs long"
moves the fake clock forward while it runs.

Expected instants are written out by hand from the rules in the guarantees page, not computed
with the code under test. The same policies on real workers of every backend are in
tests/processes/test_overlap_processes.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    CronRepeat,
    FireOutcome,
    IntervalRepeat,
    InvalidOverlap,
    JobStatus,
    ListenerRegistry,
    MisfirePolicy,
    OneShotSpec,
    RepeatSpec,
    ScheduleArrivedEvent,
    cron,
)
from schedule_sdk.core.declared import declarations_of
from schedule_sdk.testing import make_test_kit

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


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


def slow_kit(durations: dict[int, float]):
    """A kit whose listener runs ``durations[occurrence]`` minutes (0 when not named)."""
    registry = ListenerRegistry()
    kit = make_test_kit(registry, start=T0)
    registry.connect(
        SCHEDULE_ARRIVED_EVENT, lambda event: kit.clock.advance(durations.get(event.occurrence, 0) * 60)
    )
    return kit


def fired(kit, job_id):
    return [(e.occurrence, e.scheduled_for, e.fired_at) for e in kit.publisher.events_for(job_id)]


def test_skip_does_not_fire_what_came_due_while_the_previous_fire_ran():
    kit = slow_kit({1: 2.5})  # occurrence 1 runs 12:01 -> 12:03:30
    # --8<-- [start:skip]
    job = kit.service.schedule_repeat(
        RepeatSpec(topic="t.tick", timezone="UTC", repeat=IntervalRepeat(every_ms=60_000), overlap="skip")
    )
    # --8<-- [end:skip]
    kit.run_due(until=minutes(4.5))  # 12:04:30
    assert fired(kit, job.id) == [
        (1, T0 + minutes(1), T0 + minutes(1)),
        (3, T0 + minutes(4), T0 + minutes(4)),
    ]
    [missed] = kit.publisher.missed
    assert missed.reason == "overlap" and missed.count == 2
    assert missed.missed == (T0 + minutes(2), T0 + minutes(3))
    assert missed.policy == "fire_once" and missed.scheduled_job_id == job.id
    history = sorted(kit.service.history(job.id), key=lambda f: f.occurrence)
    assert [(f.occurrence, f.outcome) for f in history] == [
        (1, FireOutcome.SUCCEEDED),
        (2, FireOutcome.SKIPPED),
        (3, FireOutcome.SUCCEEDED),
    ]
    skipped = history[1]
    assert skipped.due_at == T0 + minutes(2) and skipped.fired_at == T0 + minutes(3.5)
    assert skipped.error is not None and skipped.error.startswith("overlap: 2 occurrence(s)")
    assert kit.job(job.id).scheduled_for == T0 + minutes(5) and kit.job(job.id).occurrence == 4


def test_buffer_one_fires_the_latest_overlapped_occurrence_when_the_running_one_ends():
    kit = slow_kit({1: 2.5})
    job = kit.service.schedule_repeat(every_minute(overlap="buffer_one"))
    kit.run_due(until=minutes(4.5))
    assert fired(kit, job.id) == [
        (1, T0 + minutes(1), T0 + minutes(1)),
        (3, T0 + minutes(3), T0 + minutes(3.5)),  # buffered: fires as soon as 1 ended
        (4, T0 + minutes(4), T0 + minutes(4)),
    ]
    [missed] = kit.publisher.missed
    assert missed.reason == "overlap" and missed.missed == (T0 + minutes(2),) and missed.count == 1
    outcomes = {f.occurrence: f.outcome for f in kit.service.history(job.id)}
    assert outcomes == {1: "succeeded", 2: "skipped", 3: "succeeded", 4: "succeeded"}


def test_buffer_one_with_a_single_overlapped_occurrence_skips_nothing():
    kit = slow_kit({1: 1.5})  # 12:01 -> 12:02:30: only 12:02 came due meanwhile
    job = kit.service.schedule_repeat(every_minute(overlap="buffer_one"))
    kit.run_due(until=minutes(3.5))
    assert fired(kit, job.id) == [
        (1, T0 + minutes(1), T0 + minutes(1)),
        (2, T0 + minutes(2), T0 + minutes(2.5)),
        (3, T0 + minutes(3), T0 + minutes(3)),
    ]
    assert kit.publisher.missed == []


def test_a_buffered_occurrence_fires_even_under_a_zero_grace_skip_misfire_policy():
    # The buffered occurrence is late from its due instant, but could not fire before the
    # previous fire ended: its lateness counts from then.
    kit = slow_kit({1: 1.5})
    job = kit.service.schedule_repeat(
        every_minute(overlap="buffer_one", misfire=MisfirePolicy(mode="skip", grace_ms=0))
    )
    kit.run_due(until=minutes(2.5))
    assert [o for o, _, _ in fired(kit, job.id)] == [1, 2]


def test_without_an_overlap_policy_the_misfire_policy_decides_as_before():
    kit = slow_kit({1: 2.5})
    job = kit.service.schedule_repeat(every_minute())  # fire_once, grace 0
    kit.run_due(until=minutes(4.5))
    assert fired(kit, job.id) == [
        (1, T0 + minutes(1), T0 + minutes(1)),
        (2, T0 + minutes(4), T0 + minutes(4)),
    ]
    [missed] = kit.publisher.missed
    assert missed.reason == "misfire" and missed.missed == (T0 + minutes(2), T0 + minutes(3))
    # fire_all without an overlap policy fires each one after the other
    kit = slow_kit({1: 2.5})
    job = kit.service.schedule_repeat(every_minute(misfire=MisfirePolicy(mode="fire_all")))
    kit.run_due(until=minutes(4.5))
    assert [s for _, s, _ in fired(kit, job.id)] == [T0 + minutes(m) for m in (1, 2, 3, 4)]


def test_skip_overrides_fire_all_for_what_came_due_during_the_run():
    kit = slow_kit({1: 2.5})
    job = kit.service.schedule_repeat(every_minute(overlap="skip", misfire=MisfirePolicy(mode="fire_all")))
    kit.run_due(until=minutes(4.5))
    assert [s for _, s, _ in fired(kit, job.id)] == [T0 + minutes(1), T0 + minutes(4)]
    assert [m.reason for m in kit.publisher.missed] == ["overlap"]


def test_downtime_before_the_fire_is_still_the_misfire_policys():
    # The worker is away 12:00 -> 12:05:30: 12:01 fires late (fire_once catch-up), 12:02-12:05
    # are coalesced (reason misfire); the catch-up runs 2 minutes, so 12:06 and 12:07 overlap.
    kit = slow_kit({1: 2})
    job = kit.service.schedule_repeat(every_minute(overlap="skip"))
    kit.clock.advance(minutes(5.5))
    kit.run_due(until=T0 + minutes(8.5))
    assert [(o, s) for o, s, _ in fired(kit, job.id)] == [(1, T0 + minutes(1)), (3, T0 + minutes(8))]
    misfired, overlapped = kit.publisher.missed
    assert misfired.reason == "misfire" and misfired.missed == tuple(T0 + minutes(m) for m in (2, 3, 4, 5))
    assert overlapped.reason == "overlap" and overlapped.missed == (T0 + minutes(6), T0 + minutes(7))


def test_skip_respects_limit_and_cron_schedules():
    kit = slow_kit({1: 2.5})
    cron = CronRepeat(expression="* * * * *")
    job = kit.service.schedule_repeat(every_minute(repeat=cron, overlap="skip", limit=2))
    kit.run_due(until=minutes(10))
    assert [(o, s) for o, s, _ in fired(kit, job.id)] == [(1, T0 + minutes(1)), (3, T0 + minutes(4))]
    assert kit.job(job.id).status is JobStatus.COMPLETED
    # 12:02 and 12:03 overlapped the first fire; after the last one nothing more was owed
    assert [(m.reason, m.count) for m in kit.publisher.missed] == [("overlap", 2)]


def test_a_failed_fire_out_of_attempts_moves_on_by_the_overlap_policy_too():
    kit = slow_kit({1: 2.5})

    def fail_first(event) -> None:
        if event.occurrence == 1:
            raise RuntimeError("the first occurrence fails")

    kit.registry.connect(SCHEDULE_ARRIVED_EVENT, fail_first)
    job = kit.service.schedule_repeat(every_minute(overlap="skip"))
    kit.run_due(until=minutes(4.5))
    assert [(o, s) for o, s, _ in fired(kit, job.id)] == [(1, T0 + minutes(1)), (3, T0 + minutes(4))]
    assert [m.reason for m in kit.publisher.missed] == ["overlap"]
    outcomes = {f.occurrence: f.outcome for f in kit.service.history(job.id)}
    assert outcomes == {1: "failed", 2: "skipped", 3: "succeeded"}


@pytest.mark.parametrize("bad", ["ALLOW", "allow_all", "SKIP", "", 1, True, "buffer_all"])
def test_an_unknown_overlap_policy_is_refused(bad):
    with pytest.raises(InvalidOverlap) as raised:
        every_minute(overlap=bad)
    assert raised.value.code == "SCHEDULE_INVALID_OVERLAP"


def test_a_one_shot_with_an_overlap_policy_is_refused_and_nothing_is_written():
    kit = make_test_kit(start=T0)
    with pytest.raises(InvalidOverlap, match="one-shot"):
        kit.service.schedule_at(
            OneShotSpec(topic="t.once", run_at=T0 + minutes(1), timezone="UTC", overlap="skip")
        )
    assert kit.service.list().items == []
    OneShotSpec(topic="t.once", run_at=T0, timezone="UTC", overlap=None)  # the default is fine


def test_the_policy_is_stored_shown_and_changed_by_reschedule():
    kit = make_test_kit(start=T0)
    job = kit.service.schedule_repeat(every_minute(overlap="skip"))
    assert kit.job(job.id).overlap == "skip"
    assert kit.service.list().items[0].overlap == "skip"
    new = kit.service.reschedule(job.id, every_minute(overlap="buffer_one"))
    assert kit.job(new.id).overlap == "buffer_one"
    newer = kit.service.reschedule(new.id, every_minute())
    assert kit.job(newer.id).overlap is None


# --8<-- [start:declare]
@cron("0 2 * * *", tz="Europe/Berlin", name="app.nightly-export", overlap="skip")
def nightly_export(event: ScheduleArrivedEvent) -> None:
    """Export yesterday's orders; never two exports at once, and none queued behind a slow one."""


# --8<-- [end:declare]


@cron("0 2 * * *", tz="Europe/Berlin", name="app.nightly-export")
def nightly_export_without_policy(event: ScheduleArrivedEvent) -> None:
    """The same declaration without an overlap policy."""


def test_a_declared_schedule_takes_the_policy_and_it_is_part_of_its_fingerprint():
    [declared] = declarations_of(nightly_export)
    [plain] = declarations_of(nightly_export_without_policy)
    assert declared.overlap == "skip" and declared.spec(T0).overlap == "skip"
    assert declared.fingerprint != plain.fingerprint
    # a declaration without a policy keeps the fingerprint it had before policies existed
    assert "overlap" not in plain.to_dict() and plain.spec(T0).overlap is None


def test_the_missed_events_reason_survives_its_json_form_and_older_messages_read_as_misfire():
    kit = slow_kit({1: 2.5})
    kit.service.schedule_repeat(every_minute(overlap="skip"))
    kit.run_due(until=minutes(4.5))
    [event] = kit.publisher.missed
    data = event.to_dict()
    assert data["reason"] == "overlap" and type(event).from_dict(data) == event
    del data["reason"]  # a message from a worker that predates the reason
    assert type(event).from_dict(data).reason == "misfire"
