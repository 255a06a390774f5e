"""PostgreSQL: a dead worker's session left inside a transaction does not keep its claims.

A worker paused between two statements of a transaction (``SIGSTOP``, a frozen VM, a host cut off
the network) keeps that transaction open, and with it the row locks of the claims it was renewing
or completing; the release of a dead worker's claims skips locked rows. The peer that declares it
dead ends such sessions first (found by their ``application_name``), so those claims are released
with the rest. Here the paused worker is a session of the victim's own store engine holding one
of its claims locked, directly and through PgBouncer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy import exc

from schedule_sdk import OneShotSpec
from schedule_sdk.adapters.sql.engine import session_name
from schedule_sdk.ports import WorkerInfo, WorkerRegistry, require
from tests.conftest import Backend
from tests.harness import Harness

pytestmark = pytest.mark.postgres


@pytest.fixture
def backend(postgres_either: Backend) -> Backend:
    return postgres_either


def _register(h: Harness, worker_id: str, beat: datetime) -> None:
    require(h.store, WorkerRegistry, "the test").beat(
        WorkerInfo(id=worker_id, host="elsewhere", pid=1, substrate="sql", started_at=beat, last_beat=beat)
    )


def _claimed(h: Harness, worker_id: str, count: int) -> list[str]:
    spec = OneShotSpec(topic="sessions.job", run_at=datetime.now(UTC) + timedelta(seconds=1), timezone="UTC")
    jobs = h.service.schedule_many([spec] * count)
    now = spec.run_at + timedelta(seconds=1)  # claimed as if then (a claim never fires early)
    claimed = h.store.claim_due(now, count, worker_id, now + timedelta(hours=1))
    assert sorted(j.id for j in claimed) == sorted(j.id for j in jobs)
    return sorted(j.id for j in jobs)


@pytest.fixture
def victim(backend: Backend) -> Iterator[tuple[Harness, str]]:
    """The victim's process: its store engine names its sessions after its worker id."""
    worker_id = f"victim-{time.monotonic_ns()}"
    h = backend.harness(worker_id=worker_id)
    yield h, worker_id


def _locked_open(h: Harness, job_id: str) -> sa.Connection:
    """A session of ``h``'s engine inside a transaction holding ``job_id``'s row, left open."""
    conn = h.store.engine.connect()  # type: ignore[attr-defined]
    conn.begin()
    conn.execute(sa.text("SELECT id FROM schedule_jobs WHERE id = :id FOR UPDATE"), {"id": job_id})
    return conn


def test_the_sessions_are_named_after_the_worker(backend: Backend, victim: tuple[Harness, str]) -> None:
    h, worker_id = victim
    with h.store.engine.connect() as conn:  # type: ignore[attr-defined]
        name = conn.execute(sa.text("SELECT current_setting('application_name')")).scalar()
    assert name == session_name(worker_id) == f"schedule-sdk {worker_id}"


def test_a_dead_workers_session_holding_a_claim_is_ended_and_the_claim_released(
    backend: Backend, victim: tuple[Harness, str]
) -> None:
    h, worker_id = victim
    survivor = backend.harness()
    jobs = _claimed(h, worker_id, 3)
    now = datetime.now(UTC)
    _register(h, worker_id, now - timedelta(minutes=1))
    paused = _locked_open(h, jobs[0])
    try:
        released = require(survivor.store, WorkerRegistry, "the test").release_dead(now, [], now, 10)
        assert sorted(j.id for j in released) == jobs  # the locked one too
        with pytest.raises(exc.DBAPIError):  # its transaction was ended, never committed
            paused.execute(sa.text("SELECT 1"))
    finally:
        paused.close()
    assert all(survivor.job(j).status.value == "pending" and survivor.job(j).claimed_by is None for j in jobs)


def test_a_live_workers_open_transaction_is_left_alone(backend: Backend, victim: tuple[Harness, str]) -> None:
    """Only the dead are fenced: a live worker's session inside a transaction survives another
    worker's release, and so does the lock it holds on a dead worker's claim (that row waits)."""
    h, live_id = victim
    survivor = backend.harness()
    dead_id = f"dead-{time.monotonic_ns()}"
    dead_jobs = _claimed(survivor, dead_id, 2)
    now = datetime.now(UTC)
    _register(survivor, dead_id, now - timedelta(minutes=1))
    _register(h, live_id, now)
    live = _locked_open(h, dead_jobs[0])
    try:
        released = require(survivor.store, WorkerRegistry, "the test").release_dead(
            now - timedelta(seconds=10), [], now, 10
        )
        assert [j.id for j in released] == dead_jobs[1:]  # the row the live session holds is skipped
        assert live.execute(sa.text("SELECT 1")).scalar() == 1  # still open
    finally:
        live.rollback()
        live.close()


def test_an_unnamed_session_holding_a_dead_workers_claim_hides_it(backend: Backend) -> None:
    """Why the sessions are named: without the dead worker's name on the session holding the
    lock, the release skips that claim (the lease is then its only way back)."""
    survivor = backend.harness()
    dead_id = f"dead-{time.monotonic_ns()}"
    jobs = _claimed(survivor, dead_id, 2)
    now = datetime.now(UTC)
    _register(survivor, dead_id, now - timedelta(minutes=1))
    conninfo = sa.make_url(backend.database_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo, prepare_threshold=None) as other:
        other.execute("SELECT id FROM schedule_jobs WHERE id = %s FOR UPDATE", (jobs[0],))
        released = require(survivor.store, WorkerRegistry, "the test").release_dead(now, [], now, 10)
        other.rollback()
    assert [j.id for j in released] == jobs[1:]
