"""Scheduling inside the app's own transaction (``connection=``), on every backend.

The app has its own engine and table in the database that holds the SDK's tables. A job written
in a transaction that rolls back never exists and never fires, even when it fell due meanwhile;
one written in a transaction that commits fires, never before the commit.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from schedule_sdk import JobStatus, OneShotSpec, ScheduledJob, TransactionNotJoinable
from tests.support.waiting import before_due, with_lead

#: The caller's own transaction and connection: on the pooled and Sentinel backends too.
pytestmark = pytest.mark.every_backend

metadata = sa.MetaData()
orders = sa.Table(
    "app_orders", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("job_id", sa.String)
)


POLL_INTERVAL = timedelta(seconds=0.5)  # the harness's poll interval (tests/conftest.py)


def one_shot(seconds: float = 0.2) -> OneShotSpec:
    return OneShotSpec(
        topic="tests.tx", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC"
    )


class Boom(Exception):
    pass


@pytest.fixture
def app_engine(backend):
    # Behind a transaction pooler the app's own engine prepares nothing either (the how-to says so);
    # the SDK's statements in its transactions follow the connection's setting.
    pooled = {"connect_args": {"prepare_threshold": None}} if backend.store == "pgbouncer" else {}
    engine = sa.create_engine(backend.database_url, **pooled)
    metadata.create_all(engine)
    yield engine
    engine.dispose()


def count_orders(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(orders)).scalar_one()


def test_a_rolled_back_connection_leaves_no_job_even_past_its_due_time(backend, app_engine):
    h = backend.harness().start()
    with app_engine.connect() as conn:
        job = h.service.schedule_at(one_shot(0.1), connection=conn)
        conn.execute(orders.insert().values(id=1, job_id=job.id))
        h.wait_past(job.run_at + POLL_INTERVAL)  # due for a poll interval, in the transaction
        assert h.service.get_by_id(job.id) is None  # not visible outside it
        conn.rollback()
    h.settle()
    assert h.service.get_by_id(job.id) is None and h.events_for(job.id) == []
    assert count_orders(app_engine) == 0


def test_a_committed_connection_fires_after_the_commit(backend, app_engine):
    h = backend.harness().start()
    with app_engine.begin() as conn:
        job = h.service.schedule_at(one_shot(0.1), connection=conn)
        conn.execute(orders.insert().values(id=1, job_id=job.id))
        h.wait_past(job.run_at + POLL_INTERVAL)
        assert h.events_for(job.id) == []
        committing = datetime.now(UTC)
    [event] = h.wait_events(job.id, 1, timeout=5)
    assert event.fired_at >= committing
    assert h.wait_status(job.id, "completed").status is JobStatus.COMPLETED
    assert count_orders(app_engine) == 1


def test_a_session_rolls_back_or_commits_the_job_with_the_app_row(backend, app_engine):
    h = backend.harness().start()
    with pytest.raises(Boom), Session(app_engine) as session, session.begin():
        lost = h.service.schedule_at(one_shot(0.1), connection=session)
        session.execute(orders.insert().values(id=1, job_id=lost.id))
        h.wait_past(lost.run_at + POLL_INTERVAL)
        raise Boom
    with Session(app_engine) as session, session.begin():
        kept = h.service.schedule_at(one_shot(0.1), connection=session)
        session.execute(orders.insert().values(id=2, job_id=kept.id))
        h.wait_past(kept.run_at + POLL_INTERVAL)
        assert h.events_for(kept.id) == []
    h.wait_events(kept.id, 1, timeout=5)
    h.settle()
    assert h.service.get_by_id(lost.id) is None and h.events_for(lost.id) == []
    assert count_orders(app_engine) == 1


def test_cancel_and_reschedule_take_effect_only_when_the_caller_commits(backend, app_engine):
    h = backend.harness().start()

    def rolled_back(lead: float) -> tuple[ScheduledJob, ScheduledJob]:
        kept = h.service.schedule_at(one_shot(lead))
        moved = h.service.schedule_at(one_shot(lead))
        with before_due(kept, moved), Session(app_engine) as session:
            h.service.cancel(kept.id, connection=session)
            h.service.reschedule(moved.id, one_shot(lead), connection=session)
            session.rollback()  # neither happened
        return kept, moved

    kept, moved = with_lead(rolled_back, 1.0)
    h.wait_events(kept.id, 1)
    h.wait_events(moved.id, 1)
    assert h.job(moved.id).rescheduled_to is None

    def committed(lead: float) -> tuple[ScheduledJob, ScheduledJob, ScheduledJob]:
        cancelled = h.service.schedule_at(one_shot(lead))
        replaced = h.service.schedule_at(one_shot(lead))
        with before_due(cancelled, replaced), app_engine.begin() as conn:
            h.service.cancel(cancelled.id, connection=conn)
            new = h.service.reschedule(replaced.id, one_shot(lead * 1.25), connection=conn)
        return cancelled, replaced, new

    cancelled, replaced, new = with_lead(committed, 0.8)
    h.wait_events(new.id, 1)
    h.settle()
    assert h.events_for(cancelled.id) == [] and h.events_for(replaced.id) == []
    assert h.job(cancelled.id).status is JobStatus.CANCELLED
    assert h.job(replaced.id).rescheduled_to == new.id


def test_a_connection_to_another_database_is_refused_and_writes_nothing(backend, app_engine, tmp_path):
    h = backend.harness()
    other = sa.create_engine(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        with other.connect() as conn, pytest.raises(TransactionNotJoinable) as refused:
            h.service.schedule_at(one_shot(), connection=conn)
        assert refused.value.code == "SCHEDULE_TRANSACTION_NOT_JOINABLE"
    finally:
        other.dispose()
    with pytest.raises(TransactionNotJoinable):
        h.service.schedule_at(one_shot(), connection=object())
    assert h.service.list().items == []


def test_the_async_service_joins_an_async_session_or_connection(backend, app_engine):
    from sqlalchemy.ext.asyncio import AsyncSession

    from schedule_sdk.adapters.sql.engine import make_async_engine

    h = backend.harness().start()

    async def app() -> tuple[str, str, str]:
        service = h.container.async_schedule_service()
        engine = make_async_engine(backend.database_url)  # the app's own async engine
        try:
            with pytest.raises(Boom):
                async with AsyncSession(engine) as session, session.begin():
                    lost = await service.schedule_at(one_shot(1.0), connection=session)
                    await session.execute(orders.insert().values(id=1, job_id=lost.id))
                    raise Boom
            async with AsyncSession(engine) as session, session.begin():
                kept = await service.schedule_at(one_shot(1.0), connection=session)
                await session.execute(orders.insert().values(id=2, job_id=kept.id))
            async with engine.begin() as conn:
                by_conn = await service.schedule_at(one_shot(1.0), connection=conn)
            return lost.id, kept.id, by_conn.id
        finally:
            await engine.dispose()
            await h.container.async_engine().dispose()
            queue = h.container.async_queue()
            if hasattr(queue, "aclose"):
                await queue.aclose()

    lost, kept, by_conn = asyncio.run(app())
    h.wait_events(kept, 1, timeout=5)
    h.wait_events(by_conn, 1, timeout=5)
    h.settle()
    assert h.service.get_by_id(lost) is None and h.events_for(lost) == []
    assert count_orders(app_engine) == 1


def test_each_transaction_on_a_pooled_connection_hands_its_job_off(backend, app_engine):
    """The pool hands the same DB-API connection to each ``begin()``: every commit must still run
    its own after-commit hand-off (on rq, without it the job would wait for the reconciler)."""
    h = backend.harness().start()
    jobs = []
    for _ in range(3):
        with app_engine.begin() as conn:
            jobs.append(h.service.schedule_at(one_shot(0.3), connection=conn))
    for job in jobs:
        h.wait_events(job.id, 1, timeout=5)
