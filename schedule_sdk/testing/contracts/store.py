"""What every store contract suite shares: :class:`StoreContract`, how a suite gets its
stores, and the rows and helpers the suites build their cases from."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone

from schedule_sdk.domain.calendars import Calendar
from schedule_sdk.domain.history import FireOutcome
from schedule_sdk.domain.jobs import (
    Backoff,
    ConcurrencyLimit,
    CronRepeat,
    JobMetadata,
    MisfirePolicy,
    RetryPolicy,
    ScheduledJob,
)
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.ports import (
    JobStore,
    WorkerInfo,
)
from schedule_sdk.testing.contracts.rows import NOW, at, job

PLUS_5 = timezone(timedelta(hours=5, minutes=30))

TIME_FIELDS = (
    "run_at",
    "scheduled_for",
    "ends_at",
    "last_fired_at",
    "claimed_until",
    "created_at",
    "updated_at",
    "regular_due",
)

ACTIVE, PENDING = JobStatus.ACTIVE, JobStatus.PENDING

CLOSED = (JobStatus.COMPLETED, JobStatus.CANCELLED, JobStatus.FAILED)

FINISHED = (JobStatus.COMPLETED, JobStatus.CANCELLED, JobStatus.FAILED)

OPEN = (JobStatus.PENDING, JobStatus.ACTIVE, JobStatus.PAUSED)


def full_job() -> ScheduledJob:
    """Every field set to a non-default value; times in a non-UTC offset."""
    return job(
        topic="billing.invoice-due_v2",
        status=JobStatus.ACTIVE,
        run_at=NOW.astimezone(PLUS_5),
        scheduled_for=(NOW - timedelta(seconds=3)).astimezone(PLUS_5),
        timezone="America/Argentina/Buenos_Aires",
        payload={"n": 1, "f": 1.5, "s": "é ✓ 日本", "l": [1, None, True], "o": {"x": {"y": []}}},
        metadata=JobMetadata(owner_id="u1", tenant_id="t1", correlation_id="c1", client_request_id="r1"),
        repeat=CronRepeat(expression="*/5 * * * *", timezone="Europe/Paris"),
        retry=RetryPolicy(
            attempts=5,
            backoff=Backoff(type="exponential", delay_ms=250, max_delay_ms=4000),
            retry_on=(ConnectionError, "myapp.errors.Transient"),
            give_up_on=("ValueError",),
        ),
        occurrence=7,
        attempt=3,
        occurrence_count=6,
        limit=10,
        ends_at=NOW + timedelta(days=30),
        last_fired_at=NOW - timedelta(minutes=5),
        last_error="ListenerFailed: boom",
        claimed_by="host:1:abcdefgh",
        claimed_until=NOW + timedelta(seconds=30),
        created_at=NOW - timedelta(days=1, microseconds=1),
        updated_at=NOW - timedelta(microseconds=7),
        rescheduled_from="01900000-0000-7000-8000-000000000001",
        rescheduled_to="01900000-0000-7000-8000-000000000002",
        misfire=MisfirePolicy(mode="fire_all", grace_ms=1500, max_catch_up=7),
        regular_due=(NOW + timedelta(minutes=5, microseconds=3)).astimezone(PLUS_5),
        concurrency=ConcurrencyLimit(key="tenant-7:reports.eu", limit=12),
        overlap="buffer_one",
        time_limit=timedelta(seconds=90, milliseconds=5),
        spread_ms=3_600_000,
        spread_offset_ms=1_234_567,
        jitter_ms=30_000,
        calendar=Calendar(dates=frozenset({date(2027, 12, 24)}), weekdays=frozenset({5, 6})),
        run_of="01900000-0000-7000-8000-000000000004",
        last_outcome=FireOutcome.UNHEARD,
        notice="failed",
    )


def assert_utc(j: ScheduledJob) -> None:
    for name in TIME_FIELDS:
        value = getattr(j, name)
        if value is not None:
            assert value.utcoffset() == timedelta(0), (name, value)


def moved_on(j: ScheduledJob) -> ScheduledJob:
    """``j`` with every mutable field changed (and some immutable ones, which must not be written)."""
    return j.evolve(
        status=JobStatus.PENDING,
        run_at=at(3600),
        scheduled_for=at(3500),
        occurrence=j.occurrence + 1,
        attempt=2,
        occurrence_count=j.occurrence_count + 1,
        last_fired_at=at(1).astimezone(PLUS_5),
        last_error="E: x",
        claimed_by=None,
        claimed_until=None,
        updated_at=at(2),
        rescheduled_to="01900000-0000-7000-8000-000000000003",
        regular_due=at(4000),
        last_outcome=FireOutcome.TIMEOUT,
    )


def expected(jobs: list[ScheduledJob], keep: Callable[[ScheduledJob], bool]) -> list[str]:
    return sorted(j.id for j in jobs if keep(j))


def held(by: str, until: datetime | None = None, **changes: object) -> ScheduledJob:
    return job(status=ACTIVE, claimed_by=by, claimed_until=until or at(30), **changes)


def worker(worker_id: str, beat: float = 0.0, **changes: object) -> WorkerInfo:
    values: dict[str, object] = {
        "id": worker_id,
        "host": "host-1",
        "pid": 4242,
        "substrate": "sql",
        "started_at": at(-3600),
        "last_beat": at(beat),
        "in_flight": 0,
        "node": "boot/pid:[1]",
    }
    values.update(changes)
    return WorkerInfo(**values)  # type: ignore[arg-type]


def held_due(by: str, **changes: object) -> ScheduledJob:
    return job(status=ACTIVE, claimed_by=by, claimed_until=at(30), run_at=at(-1), **changes)


class StoreContract:
    """How a contract suite gets its stores (override :meth:`open_store`, optionally the rest)."""

    _store: JobStore | None = None

    @property
    def job_store(self) -> JobStore:
        """The current test's store, opened by :meth:`open_store` on first use."""
        if self._store is None:
            self._store = self.open_store()
        return self._store

    def open_store(self) -> JobStore:
        """A fresh, empty store (once per test)."""
        raise NotImplementedError("a contract subclass returns its store from open_store()")

    def reopen(self) -> JobStore:
        """Another store on the same data, standing in for another process (its own connections).
        Default: the same store object (right for an in-memory store)."""
        return self.job_store

    def close_stores(self) -> None:
        """Release what the test opened (after each test that opened a store)."""
        self.job_store.close()

    def setup_method(self, method: object) -> None:
        self._store = None

    def teardown_method(self, method: object) -> None:
        if self._store is not None:
            self.close_stores()
        self._store = None
