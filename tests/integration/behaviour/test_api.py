"""The API on every backend, through ScheduleService and AsyncScheduleService alike: validation,
idempotency, cancel, reschedule, list."""

from __future__ import annotations

import base64
import threading
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from schedule_sdk import (
    Backoff,
    ClientRequestIdInUse,
    CronRepeat,
    IntervalRepeat,
    InvalidCron,
    InvalidCursor,
    InvalidInterval,
    InvalidMetadata,
    InvalidPayload,
    InvalidRetry,
    InvalidStatus,
    InvalidTimezone,
    InvalidTopic,
    JobMetadata,
    JobNotFound,
    JobStatus,
    NaiveDatetime,
    NotReschedulable,
    OneShotSpec,
    RepeatSpec,
    RetryPolicy,
    RunAtInPast,
    ScheduleError,
    ScheduleValidationError,
)
from schedule_sdk.domain import timing

#: Every test here runs against ScheduleService and AsyncScheduleService on every backend.
pytestmark = pytest.mark.usefixtures("service_kind")


def soon(seconds: float = 3600) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def one_shot(**changes: object) -> OneShotSpec:
    values: dict[str, object] = {"topic": "tests.reminder", "run_at": soon(), "timezone": "UTC"}
    values.update(changes)
    return OneShotSpec(**values)  # type: ignore[arg-type]


def count_jobs(harness) -> int:
    return len(harness.service.list(limit=500).items)


@pytest.mark.every_backend
def test_schedule_at_stores_everything_it_was_given(backend):
    h = backend.harness()
    run_at = soon().astimezone(ZoneInfo("America/Mexico_City"))
    spec = one_shot(
        run_at=run_at,
        timezone="America/Mexico_City",
        payload={"userId": "u1", "nested": {"n": [1, 2.5, None, True]}, "text": "héllo"},
        metadata=JobMetadata(owner_id="u1", tenant_id="t1", correlation_id="c1", client_request_id="r1"),
        retry=RetryPolicy(attempts=3, backoff=Backoff(type="exponential", delay_ms=250)),
    )
    job = h.service.schedule_at(spec)
    stored = h.job(job.id)
    assert stored == job
    assert stored.status is JobStatus.PENDING
    assert stored.run_at == run_at and stored.run_at.tzinfo == UTC
    assert stored.timezone == "America/Mexico_City"
    assert stored.payload == spec.payload and stored.metadata == spec.metadata and stored.retry == spec.retry
    assert (stored.occurrence, stored.attempt, stored.occurrence_count) == (1, 1, 0)
    assert len(job.id) == 36 and job.id[14] == "7"  # UUIDv7 text


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: one_shot(run_at=datetime.now() + timedelta(hours=1)), NaiveDatetime),
        (lambda: one_shot(timezone="Mars/Olympus_Mons"), InvalidTimezone),
        (lambda: one_shot(timezone=""), InvalidTimezone),
        (lambda: one_shot(topic="has space"), InvalidTopic),
        (lambda: one_shot(topic="a..b"), InvalidTopic),
        (lambda: one_shot(topic=""), InvalidTopic),
        (lambda: one_shot(payload={"when": datetime.now(UTC)}), InvalidPayload),
        (lambda: one_shot(payload={"x": float("nan")}), InvalidPayload),
        (lambda: one_shot(payload=["not", "an", "object"]), InvalidPayload),
        (lambda: one_shot(metadata=JobMetadata(owner_id="")), InvalidMetadata),
        (lambda: one_shot(retry=RetryPolicy(attempts=0)), InvalidRetry),
        (
            lambda: one_shot(retry=RetryPolicy(attempts=2, backoff=Backoff(type="linear", delay_ms=1))),
            InvalidRetry,
        ),
        (
            lambda: RepeatSpec(topic="t", timezone="UTC", repeat=CronRepeat(expression="61 * * * *")),
            InvalidCron,
        ),
        (
            lambda: RepeatSpec(topic="t", timezone="UTC", repeat=CronRepeat(expression="0 0 30 2 *")),
            InvalidCron,
        ),
        (lambda: RepeatSpec(topic="t", timezone="UTC", repeat=CronRepeat(expression="* * *")), InvalidCron),
        (lambda: RepeatSpec(topic="t", timezone="UTC", repeat=IntervalRepeat(every_ms=0)), InvalidInterval),
        (
            lambda: RepeatSpec(topic="t", timezone="UTC", repeat=IntervalRepeat(every_ms=True)),
            InvalidInterval,
        ),
        (
            lambda: RepeatSpec(
                topic="t", timezone="UTC", repeat=CronRepeat(expression="0 9 * * *", timezone="X/Y")
            ),
            InvalidTimezone,
        ),
    ],
)
def test_invalid_specs_cannot_be_built(make, error):
    with pytest.raises(error) as raised:
        make()
    assert isinstance(raised.value, ScheduleValidationError) and isinstance(raised.value, ValueError)
    assert raised.value.code.startswith("SCHEDULE_")


def test_refused_calls_write_nothing(backend):
    h = backend.harness(max_payload_bytes=100)
    with pytest.raises(RunAtInPast) as past:
        h.service.schedule_at(one_shot(run_at=datetime.now(UTC) - timedelta(seconds=1)))
    assert past.value.code == "SCHEDULE_RUN_AT_IN_PAST"
    with pytest.raises(InvalidPayload) as big:
        h.service.schedule_at(one_shot(payload={"blob": "x" * 200}))
    assert big.value.code == "SCHEDULE_INVALID_PAYLOAD"
    with pytest.raises(TypeError):
        h.service.schedule_at(RepeatSpec(topic="t", timezone="UTC", repeat=IntervalRepeat(every_ms=1000)))
    assert count_jobs(h) == 0


def test_client_request_id_is_unique_across_all_statuses(backend):
    h = backend.harness()
    first = h.service.schedule_at(one_shot(metadata=JobMetadata(client_request_id="req-1")))
    h.service.cancel(first.id)
    with pytest.raises(ClientRequestIdInUse) as raised:
        h.service.schedule_at(one_shot(metadata=JobMetadata(client_request_id="req-1")))
    assert raised.value.code == "SCHEDULE_CLIENT_REQUEST_ID_IN_USE"
    assert "req-1" in str(raised.value)
    assert count_jobs(h) == 1


@pytest.mark.every_backend
def test_client_request_id_race_has_exactly_one_winner(backend):
    h = backend.harness()
    h.service.get_by_id("warm-up")  # build the engine before the threads race
    for round_ in range(5):
        barrier = threading.Barrier(2)
        outcomes: list[object] = []

        def attempt(request_id: str, barrier: threading.Barrier, outcomes: list[object]) -> None:
            barrier.wait()
            try:
                outcomes.append(
                    h.service.schedule_at(one_shot(metadata=JobMetadata(client_request_id=request_id)))
                )
            except ScheduleError as error:
                outcomes.append(error)

        threads = [
            threading.Thread(target=attempt, args=(f"race-{round_}", barrier, outcomes)) for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(isinstance(o, ClientRequestIdInUse) for o in outcomes) == 1, outcomes
    assert count_jobs(h) == 5


def test_cancel_is_idempotent_and_unknown_ids_are_not_found(backend):
    h = backend.harness()
    job = h.service.schedule_at(one_shot())
    h.service.cancel(job.id)
    h.service.cancel(job.id)
    assert h.job(job.id).status is JobStatus.CANCELLED
    with pytest.raises(JobNotFound) as missing:
        h.service.cancel("01900000-0000-7000-8000-000000000000")
    assert missing.value.code == "SCHEDULE_NOT_FOUND" and isinstance(missing.value, LookupError)
    assert h.service.get_by_id("01900000-0000-7000-8000-000000000000") is None


@pytest.mark.every_backend
def test_reschedule_replaces_the_job_in_one_step(backend):
    h = backend.harness()
    old = h.service.schedule_at(one_shot(payload={"v": 1}))
    new = h.service.reschedule(old.id, one_shot(run_at=soon(7200), payload={"v": 2}))
    assert new.id != old.id and new.rescheduled_from == old.id
    assert h.job(new.id) == new and new.status is JobStatus.PENDING and new.payload == {"v": 2}
    replaced = h.job(old.id)
    assert replaced.status is JobStatus.CANCELLED and replaced.rescheduled_to == new.id


def test_reschedule_refuses_finished_or_unknown_jobs_and_changes_nothing(backend):
    h = backend.harness()
    old = h.service.schedule_at(one_shot())
    h.service.cancel(old.id)
    with pytest.raises(NotReschedulable) as refused:
        h.service.reschedule(old.id, one_shot())
    assert refused.value.code == "SCHEDULE_NOT_RESCHEDULABLE"
    with pytest.raises(JobNotFound):
        h.service.reschedule("01900000-0000-7000-8000-000000000000", one_shot())
    live = h.service.schedule_at(one_shot())
    with pytest.raises(RunAtInPast):
        h.service.reschedule(live.id, one_shot(run_at=datetime.now(UTC) - timedelta(minutes=1)))
    assert h.job(live.id).status is JobStatus.PENDING
    assert count_jobs(h) == 2


def test_reschedule_rolls_back_when_the_new_job_is_refused(backend):
    h = backend.harness()
    taken = h.service.schedule_at(one_shot(metadata=JobMetadata(client_request_id="taken")))
    victim = h.service.schedule_at(one_shot())
    with pytest.raises(ClientRequestIdInUse):
        h.service.reschedule(victim.id, one_shot(metadata=JobMetadata(client_request_id="taken")))
    assert h.job(victim.id).status is JobStatus.PENDING and h.job(victim.id).rescheduled_to is None
    assert h.job(taken.id).status is JobStatus.PENDING and count_jobs(h) == 2


@pytest.mark.every_backend
def test_list_pages_with_a_stable_keyset_order_and_filters(backend):
    h = backend.harness()
    ids = [
        h.service.schedule_at(one_shot(metadata=JobMetadata(owner_id=f"owner-{i % 2}", tenant_id="t"))).id
        for i in range(45)
    ]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = h.service.list(tenant_id="t", limit=20, cursor=cursor)
        seen += [j.id for j in page.items]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 3 and seen == ids  # creation order, no gaps, no duplicates
    owner0 = h.service.list(owner_id="owner-0", limit=100).items
    assert [j.id for j in owner0] == ids[0::2]
    h.service.cancel(ids[0])
    assert [j.id for j in h.service.list(status="cancelled").items] == [ids[0]]
    both = h.service.list(status=[JobStatus.PENDING, "cancelled"], limit=100).items
    assert len(both) == 45
    assert h.service.list(topic="other").items == []
    with pytest.raises(InvalidCursor):
        h.service.list(cursor="not-a-cursor")
    with pytest.raises(InvalidCursor):
        h.service.list(limit=0)
    with pytest.raises(InvalidStatus) as refused:
        h.service.list(status="sleeping")
    assert refused.value.code == "SCHEDULE_INVALID_STATUS" and not isinstance(refused.value, InvalidCursor)


@pytest.mark.parametrize(
    "decoded",
    ["\x00" * 36, "\x1b[31m" + "x" * 31, "0" * 35 + "\n", "' OR '1'='1" + " " * 25, "é" * 18, "-" * 36],
    ids=["nuls", "ansi", "newline", "quote", "non-ascii", "dashes"],
)
def test_a_cursor_that_decodes_to_no_job_id_is_invalid_on_every_store(backend, decoded):
    h = backend.harness()
    h.service.schedule_at(one_shot())
    cursor = base64.urlsafe_b64encode(decoded.encode()).decode().rstrip("=")
    with pytest.raises(InvalidCursor) as refused:  # on PostgreSQL 36 NULs were StoreUnavailable (503)
        h.service.list(cursor=cursor)
    assert refused.value.http_status == 422 and len(h.service.list().items) == 1


def test_repeat_first_occurrence_follows_the_cron_in_its_zone(backend):
    h = backend.harness()
    spec = RepeatSpec(
        topic="ai.agent-heartbeat",
        timezone="UTC",
        repeat=CronRepeat(expression="0 9 * * 1-5", timezone="America/Mexico_City"),
    )
    before = datetime.now(UTC)
    job = h.service.schedule_repeat(spec)
    expected = timing.next_cron_time("0 9 * * 1-5", "America/Mexico_City", before)
    assert job.run_at == expected == job.scheduled_for
    assert h.job(job.id).repeat == spec.repeat


def test_client_request_id_is_unique_per_tenant(backend):
    h = backend.harness()

    def spec(tenant: str | None) -> OneShotSpec:
        return one_shot(metadata=JobMetadata(tenant_id=tenant, client_request_id="order-1"))

    jobs = [h.service.schedule_at(spec(tenant)) for tenant in ("t1", "t2", None)]
    assert len({job.id for job in jobs}) == 3  # one id, three owners: no clash
    for tenant in ("t1", None):
        with pytest.raises(ClientRequestIdInUse):
            h.service.schedule_at(spec(tenant))
    with pytest.raises(ClientRequestIdInUse) as caught:
        h.service.schedule_many([spec("t3"), spec("t2")])
    assert caught.value.index == 1
    assert count_jobs(h) == 3


#: The reviewer's triggers: each once escaped as OverflowError, RecursionError,
#: UnicodeEncodeError or ValueError, or was stored on SQLite and StoreUnavailable on PostgreSQL.
HOSTILE_CALLS = {
    "year-1-at-plus-14": lambda s: s.schedule_at(
        one_shot(run_at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))))
    ),
    "9999-at-minus-5": lambda s: s.schedule_at(
        one_shot(run_at=datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-5))))
    ),
    "payload-10000-deep": lambda s: s.schedule_at(one_shot(payload=_nested(10_000))),
    "payload-surrogate": lambda s: s.schedule_at(one_shot(payload={"a": "\ud800"})),
    "payload-nul": lambda s: s.schedule_at(one_shot(payload={"a": "\x00"})),
    "owner-surrogate": lambda s: s.schedule_at(one_shot(metadata=JobMetadata(owner_id="\udc00"))),
    "owner-nul": lambda s: s.schedule_at(one_shot(metadata=JobMetadata(owner_id="a\x00"))),
    "filter-surrogate": lambda s: s.list(owner_id="\ud800"),
    "filter-nul": lambda s: s.list(tenant_id="\x00"),
    "cron-5000-digits": lambda s: s.schedule_repeat(
        RepeatSpec(topic="t", timezone="UTC", repeat=CronRepeat(expression="1" * 5000 + " * * * *"))
    ),
}


def _nested(depth: int) -> dict[str, object]:
    payload: dict[str, object] = {}
    for _ in range(depth - 1):
        payload = {"a": payload}
    return payload


@pytest.mark.parametrize("name", HOSTILE_CALLS)
def test_hostile_input_is_a_typed_validation_error_on_every_backend(backend, name):
    h = backend.harness()
    with pytest.raises(ScheduleValidationError) as refused:
        HOSTILE_CALLS[name](h.service)
    assert refused.value.code.startswith("SCHEDULE_INVALID")
    assert count_jobs(h) == 0


@pytest.mark.parametrize("job_id", ["\x00", "\ud800", "x" * 256])
def test_an_id_no_job_can_have_is_not_found_without_asking_the_store(backend, job_id):
    h = backend.harness()
    assert h.service.get_by_id(job_id) is None
    for method in ("cancel", "pause", "resume", "trigger", "preview"):
        with pytest.raises(JobNotFound):
            getattr(h.service, method)(job_id)
