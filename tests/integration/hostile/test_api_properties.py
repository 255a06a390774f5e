"""Generated hostile input through the public API, on every backend: each call is accepted or
refused with a typed error of the library (never an untyped exception, never ``StoreUnavailable``
for bad input), a refused call writes nothing, and the next valid call works."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from schedule_sdk import (
    CronRepeat,
    IntervalRepeat,
    JobMetadata,
    OneShotSpec,
    RepeatSpec,
    ScheduleService,
)
from schedule_sdk.errors import ScheduleError, ScheduleUnavailable
from tests.support import hostile

#: Through ScheduleService and AsyncScheduleService alike, on every backend.
pytestmark = pytest.mark.usefixtures("service_kind")

Call = Callable[[ScheduleService], Any]


def metadata(owner: str | None, tenant: str | None, request_id: str | None) -> JobMetadata:
    return JobMetadata(owner_id=owner, tenant_id=tenant, client_request_id=request_id)


def one_shot(topic: str, run_at: datetime, zone: str, payload: Any, meta: tuple[Any, ...]) -> Call:
    def call(service: ScheduleService) -> Any:
        spec = OneShotSpec(
            topic=topic, run_at=run_at, timezone=zone, payload=payload, metadata=metadata(*meta)
        )
        return service.schedule_at(spec)

    return call


def repeat(topic: str, zone: str, cron: str | None, every: Any, ends_at: datetime | None) -> Call:
    def call(service: ScheduleService) -> Any:
        rule = (
            CronRepeat(expression=cron, timezone=zone) if cron is not None else IntervalRepeat(every_ms=every)
        )
        spec = RepeatSpec(
            topic="ok.topic" if topic is None else topic, timezone=zone, repeat=rule, ends_at=ends_at
        )
        return service.preview(spec, 3), service.schedule_repeat(spec)

    return call


def by_id(method: str, job_id: str) -> Call:
    def call(service: ScheduleService) -> Any:
        return getattr(service, method)(job_id)

    return call


def listing(owner: Any, tenant: Any, topic: Any, status: Any, cursor: Any) -> Call:
    def call(service: ScheduleService) -> Any:
        return service.list(owner_id=owner, tenant_id=tenant, topic=topic, status=status, cursor=cursor)

    return call


def history(job_id: str, before: datetime | None) -> Call:
    def call(service: ScheduleService) -> Any:
        read = getattr(service, "history", None)  # AsyncScheduleService has no history()
        return None if read is None else read(job_id, before=before)

    return call


def upcoming(window: timedelta, limit: int, topic: Any, tenant: Any) -> Call:
    def call(service: ScheduleService) -> Any:
        read = getattr(service, "upcoming", None)
        return None if read is None else read(window, limit=limit, topic=topic, tenant=tenant)

    return call


def many(calls: list[tuple[str, datetime]]) -> Call:
    def call(service: ScheduleService) -> Any:
        return service.schedule_many(
            [OneShotSpec(topic=topic, run_at=run_at, timezone="UTC") for topic, run_at in calls]
        )

    return call


meta = st.tuples(hostile.maybe_text, hostile.maybe_text, hostile.maybe_text)
calls = st.one_of(
    st.builds(one_shot, hostile.topics, hostile.datetimes, hostile.zones, hostile.payloads, meta),
    st.builds(
        repeat,
        st.one_of(st.none(), hostile.topics),
        hostile.zones,
        st.one_of(st.none(), hostile.crons),
        hostile.intervals,
        st.one_of(st.none(), hostile.datetimes),
    ),
    st.builds(
        by_id,
        st.sampled_from(["get_by_id", "cancel", "pause", "resume", "trigger", "preview"]),
        hostile.ids,
    ),
    st.builds(
        listing,
        hostile.maybe_text,
        hostile.maybe_text,
        hostile.maybe_text,
        st.one_of(st.none(), hostile.hostile_text, st.just("pending")),
        hostile.cursors,
    ),
    st.builds(history, hostile.ids, st.one_of(st.none(), hostile.datetimes)),
    st.builds(
        upcoming,
        st.one_of(st.timedeltas(), st.just(timedelta.max)),
        st.integers(-1, 1001),
        hostile.maybe_text,
        hostile.maybe_text,
    ),
    st.builds(many, st.lists(st.tuples(hostile.topics, hostile.datetimes), max_size=4)),
)


def written(engine: sa.Engine) -> tuple[Any, ...]:
    """What a write would change: the rows and the latest update."""
    with engine.connect() as conn:
        return tuple(conn.execute(sa.text("SELECT count(*), max(updated_at) FROM schedule_jobs")).one())


def test_hostile_calls_are_accepted_or_refused_typed_and_refusals_write_nothing(backend):
    harness = backend.harness()
    service = harness.service
    engine = harness.container.engine()

    @hostile.HOSTILE
    @given(call=calls)
    def check(call: Call) -> None:
        before = written(engine)
        try:
            call(service)
        except ScheduleError as error:
            assert not isinstance(error, ScheduleUnavailable), f"bad input reported as unavailable: {error!r}"
            assert error.code and str(error)
            assert written(engine) == before, f"{error!r} wrote something"
        # whatever came before, a valid call works
        run_at = datetime.now(UTC) + timedelta(hours=1)
        job = service.schedule_at(OneShotSpec(topic="after.hostile", run_at=run_at, timezone="UTC"))
        assert service.get_by_id(job.id) == job

    check()
