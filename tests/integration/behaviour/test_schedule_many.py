"""``ScheduleService.schedule_many`` on every backend: all or nothing, refusals name the spec."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    ClientRequestIdInUse,
    CronRepeat,
    IntervalRepeat,
    InvalidPayload,
    JobMetadata,
    JobStatus,
    OneShotSpec,
    RepeatSpec,
    RunAtInPast,
)

#: schedule_many runs through ScheduleService and AsyncScheduleService alike.
pytestmark = pytest.mark.usefixtures("service_kind")


def at(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def one_shot(seconds: float = 3600, **changes: object) -> OneShotSpec:
    values: dict[str, object] = {"topic": "tests.many", "run_at": at(seconds), "timezone": "UTC"}
    values.update(changes)
    return OneShotSpec(**values)  # type: ignore[arg-type]


def stored_ids(harness) -> list[str]:
    return [j.id for j in harness.service.list(limit=500).items]


@pytest.mark.every_backend
def test_schedule_many_writes_every_job_in_order_and_each_fires_once(backend):
    h = backend.harness().start()
    # Due soon enough to fire within the test, far enough ahead that a loaded machine cannot
    # reach the last run_at before the batch is validated (that is RunAtInPast, by design).
    specs = [one_shot(3 + i * 0.01, payload={"i": i}) for i in range(30)]
    specs.append(RepeatSpec(topic="tests.many", timezone="UTC", repeat=IntervalRepeat(every_ms=60_000)))
    specs.append(
        RepeatSpec(topic="tests.many", timezone="Europe/Paris", repeat=CronRepeat(expression="0 3 * * *"))
    )
    jobs = h.service.schedule_many(specs)
    assert [j.payload for j in jobs[:30]] == [{"i": i} for i in range(30)]
    assert [j.repeat for j in jobs[30:]] == [s.repeat for s in specs[30:]]
    assert all(h.job(j.id) == j and j.status is JobStatus.PENDING for j in jobs)
    assert sorted(stored_ids(h)) == sorted(j.id for j in jobs)
    for job in jobs[:30]:  # handed to the execution queue: each one-shot fires, never early
        [event] = h.wait_events(job.id, 1)
        assert event.fired_at >= job.run_at and event.user_payload == job.payload
    assert all(h.wait_status(j.id, "completed") for j in jobs[:30])
    assert h.events_for(jobs[30].id) == []


def test_schedule_many_of_nothing_writes_nothing(backend):
    h = backend.harness()
    assert h.service.schedule_many([]) == []
    assert stored_ids(h) == []


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (lambda: one_shot(run_at=datetime.now(UTC) - timedelta(seconds=1)), RunAtInPast),
        (lambda: one_shot(payload={"blob": "x" * 200}), InvalidPayload),
        (
            lambda: RepeatSpec(
                topic="t", timezone="UTC", repeat=IntervalRepeat(every_ms=60_000), ends_at=at(1)
            ),
            RunAtInPast,
        ),
    ],
)
def test_a_bad_spec_is_refused_by_its_index_and_nothing_is_written(backend, bad, error):
    h = backend.harness(max_payload_bytes=100)
    specs = [one_shot(), one_shot(), bad(), one_shot()]
    with pytest.raises(error) as refused:
        h.service.schedule_many(specs)
    assert refused.value.index == 2
    assert str(refused.value).startswith("specs[2]: ")
    assert stored_ids(h) == []


def test_a_non_spec_is_a_type_error_naming_its_index(backend):
    h = backend.harness()
    with pytest.raises(TypeError, match=r"specs\[1\]"):
        h.service.schedule_many([one_shot(), "not a spec"])  # type: ignore[list-item]
    assert stored_ids(h) == []


def test_a_client_request_id_repeated_in_the_batch_is_refused_and_nothing_is_written(backend):
    h = backend.harness()
    specs = [one_shot(metadata=JobMetadata(client_request_id=name)) for name in ("a", "b", "c", "b")]
    with pytest.raises(ClientRequestIdInUse) as refused:
        h.service.schedule_many(specs)
    assert refused.value.index == 3 and refused.value.client_request_id == "b"
    assert refused.value.code == "SCHEDULE_CLIENT_REQUEST_ID_IN_USE"
    assert stored_ids(h) == []


@pytest.mark.every_backend
def test_a_client_request_id_already_used_is_refused_by_index_and_nothing_is_written(backend):
    h = backend.harness()
    taken = h.service.schedule_at(one_shot(metadata=JobMetadata(client_request_id="taken")))
    h.service.cancel(taken.id)
    specs = [one_shot(metadata=JobMetadata(client_request_id=f"new-{i}")) for i in range(5)]
    specs[3] = one_shot(metadata=JobMetadata(client_request_id="taken"))
    with pytest.raises(ClientRequestIdInUse) as refused:
        h.service.schedule_many(specs)
    assert refused.value.index == 3 and refused.value.client_request_id == "taken"
    assert "specs[3]" in str(refused.value)
    assert stored_ids(h) == [taken.id]
    assert len(h.service.schedule_many(specs[:3] + specs[4:])) == 4  # the others are still free
