"""PostgreSQL: the heartbeat's lease renewal never waits for a row another transaction holds.

A worker renews its claims on one connection while its recorder completes some of the same rows
on another, in another order; were the renewal to wait for those rows, the two could deadlock
(PostgreSQL breaks it after ``deadlock_timeout``, a second in which the heartbeat stands still and
peers may judge the worker dead). The renewal skips a locked row instead: it is being completed,
and the next beat renews it if it is still held.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa

from schedule_sdk import OneShotSpec
from tests.conftest import Backend

pytestmark = pytest.mark.postgres


def test_renewing_claims_skips_a_row_locked_elsewhere_and_renews_the_rest(postgres_sql: Backend) -> None:
    h = postgres_sql.harness()
    store = h.container.store()
    spec = OneShotSpec(topic="locks.job", run_at=datetime.now(UTC) + timedelta(seconds=1), timezone="UTC")
    jobs = h.service.schedule_many([spec, spec, spec])
    now = spec.run_at + timedelta(seconds=1)  # claimed as if then (a claim never fires early)
    claimed = store.claim_due(now, 10, "w1", now + timedelta(seconds=5))
    assert sorted(j.id for j in claimed) == sorted(j.id for j in jobs)
    locked, *free = sorted(j.id for j in jobs)
    until = now + timedelta(seconds=60)
    conninfo = sa.make_url(postgres_sql.database_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo) as other:  # a transaction holding one of the rows, uncommitted
        other.execute("SELECT id FROM schedule_jobs WHERE id = %s FOR UPDATE", (locked,))
        renewal = threading.Thread(target=store.extend_claims, args=("w1", [locked, *free], until))
        renewal.start()
        renewal.join(timeout=20)
        still_waiting = renewal.is_alive()
        other.rollback()
    renewal.join()
    assert not still_waiting, "the renewal waited for the locked row"
    leases = {job_id: store.get(job_id).claimed_until for job_id in (locked, *free)}  # type: ignore[union-attr]
    assert [leases[job_id] == until for job_id in free] == [True, True]
    assert leases[locked] != until  # skipped: left to the next beat
