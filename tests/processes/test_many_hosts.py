"""Many hosts: four worker processes, each as if on a host of its own (its own hostname and PID
namespace, so peers judge it by its heartbeat alone), against one PostgreSQL (and one Redis on the
rq substrate) with 10,000 jobs. One host is killed (SIGKILL) mid-run while it holds claims.

It ends with the check of every fault test: every acknowledged job fired, none early (by the
database's clock: each fire is stamped by PostgreSQL, tests/support/observed.py), no job fired whose
cancel returned before it could be claimed; each occurrence fired once, but for the fires the
killed host had started (at least once); and the killed host's claims were released by a live
worker that declared it dead, before their lease ended (by the database's clock). How soon that
takeover comes (``dead_after`` plus a heartbeat, docs/howto/production-rq.md) is measured by
``bench/recovery.py --peer``, not here.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from schedule_sdk import OneShotSpec, ScheduledJob
from schedule_sdk.core.claim_timing import CLAIM_AHEAD
from schedule_sdk.ports import WorkerRegistry, require
from tests.support.observed import conninfo, create_observed, observed, observed_count
from tests.support.waiting import wait_for, wait_until, with_lead
from tests.support.worker_process import WorkerProcess

JOBS = 10_000
CANCELLED = 200
HOSTS = 4
#: Claims are released by the dead-worker takeover, never by their lease (60 s) in this test.
LEASE = 60.0
DEAD_AFTER = 3.0
#: How long before its job's due instant a cancel must have returned to be sure to precede the
#: job's claim (a worker claims at most ``CLAIM_AHEAD`` early): such a job never fires.
BEFORE_ANY_CLAIM = CLAIM_AHEAD + timedelta(milliseconds=490)
#: Each chunk of jobs falls due this long after the previous chunk's scheduling returned (or
#: longer: with_lead).
LEAD = timedelta(seconds=3)


def spec(run_at: datetime) -> OneShotSpec:
    return OneShotSpec(topic="hosts.job", run_at=run_at, timezone="UTC")


def query(database_url: str, sql: str, *params: object) -> list[tuple]:
    with psycopg.connect(conninfo(database_url), autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def held_by(database_url: str, worker_id: str) -> list[str]:
    sql = "SELECT id FROM schedule_jobs WHERE status = 'active' AND claimed_by = %s"
    return [row[0] for row in query(database_url, sql, worker_id)]


def still_claimed(database_url: str, jobs: list[str], worker_id: str) -> list[str]:
    """Those of ``jobs`` still in a claim of ``worker_id`` (a released job is pending again, or
    claimed by another worker, or done)."""
    sql = "SELECT id FROM schedule_jobs WHERE status = 'active' AND claimed_by = %s AND id = ANY(%s)"
    return [row[0] for row in query(database_url, sql, worker_id, jobs)]


def schedule_chunk(h) -> list[ScheduledJob]:
    """1,000 one-shots 1 ms apart, due ``LEAD`` from now (or later: ``with_lead``)."""

    def chunk(lead: float) -> list[ScheduledJob]:
        start = datetime.now(UTC) + timedelta(seconds=lead)
        return h.service.schedule_many([spec(start + timedelta(milliseconds=i)) for i in range(1000)])

    return with_lead(chunk, LEAD.total_seconds())


def claims_end(database_url: str, jobs: list[str]) -> datetime:
    """The first instant at which one of ``jobs``' claims runs out of lease."""
    sql = "SELECT min(claimed_until) FROM schedule_jobs WHERE status = 'active' AND id = ANY(%s)"
    return query(database_url, sql, jobs)[0][0]


def database_now(database_url: str) -> datetime:
    return query(database_url, "SELECT clock_timestamp()")[0][0]


def all_completed(database_url: str, jobs: list[str]) -> bool:
    sql = "SELECT count(*) FROM schedule_jobs WHERE status = 'completed' AND id = ANY(%s)"
    return query(database_url, sql, jobs)[0][0] == len(jobs)


# 10,000 fires through four processes on a shared two-core machine take a minute or two.
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_four_hosts_fire_10000_jobs_once_and_take_over_a_killed_hosts_claims(postgres_backend, tmp_path):
    backend = postgres_backend
    url = backend.database_url
    create_observed(url)
    events = tmp_path / "events.log"
    settings = {"lease_seconds": LEASE, "dead_after": DEAD_AFTER, "worker_concurrency": 4, "pool_size": 4}
    h = backend.harness(**settings)
    env = {"SDK_TEST_OBSERVE": "1"}
    # the victim's listeners are slow: it always holds claims it has not fired yet
    victim = WorkerProcess(backend, events, env=env, host="host-0", worker_id="worker-0",
                           listener_sleep=0.2, **settings)  # fmt: skip
    hosts = [victim] + [
        WorkerProcess(backend, events, env=env, host=f"host-{i}", worker_id=f"worker-{i}", **settings)
        for i in range(1, HOSTS)
    ]
    survivors = hosts[1:]
    try:
        assert {w.host for w in require(h.container.store(), WorkerRegistry, "the test").workers()} == {
            f"host-{i}" for i in range(HOSTS)
        }
        # 10 chunks of 1,000 jobs, 1 ms apart; each chunk falls due LEAD after the previous one's
        # scheduling returned, and 20 of its jobs are cancelled at once. What each cancel found is
        # judged by when it returned: long enough before its job's due instant, nothing claimed it.
        jobs, run_at, cancelled, before_any_claim = [], {}, [], []
        for _ in range(JOBS // 1000):
            made = schedule_chunk(h)
            jobs += [j.id for j in made]
            run_at.update((j.id, j.run_at) for j in made)
            for job in made[1 :: JOBS // CANCELLED]:
                h.service.cancel(job.id)
                cancelled.append(job.id)
                if datetime.now(UTC) < job.run_at - BEFORE_ANY_CLAIM:
                    before_any_claim.append(job.id)
        assert len(cancelled) == CANCELLED and before_any_claim, "no cancel returned before its job was due"
        acknowledged = sorted(set(jobs) - set(cancelled))
        assert wait_until(lambda: observed_count(url) >= JOBS // 4, 300)
        assert wait_until(lambda: len(held_by(url, "worker-0")) > 0, 120)
        victim.kill()
        held = held_by(url, "worker-0")
        assert held, "the victim held no claims when it was killed"
        lease_ends = claims_end(url, held)
        # released by a live worker that declared it dead, before the claims' lease ended (both
        # instants on the database's clock; the deadline only guards against a hang); then fired
        # by the survivors behind their own backlog (the victim held ~2,000 claims)
        released = wait_for(
            lambda: database_now(url) if not still_claimed(url, held, "worker-0") else None,
            "the killed host's claims to be released",
            timeout=2 * LEASE,
        )
        assert released < lease_ends, f"released at {released}, after the lease ended ({lease_ends})"
        assert wait_until(lambda: all_completed(url, acknowledged), 300)
    finally:
        codes = [w.terminate() for w in survivors]
        if victim.proc.poll() is None:
            victim.kill()
    assert codes == [0] * len(survivors)
    fires = observed(url)
    counts = Counter(f.job_id for f in fires)
    assert set(acknowledged) <= set(counts), len(set(acknowledged) - set(counts))  # all fired
    assert not set(before_any_claim) & set(counts), sorted(set(before_any_claim) & set(counts))[:5]
    assert set(counts) <= set(jobs)
    by_victim = {f.job_id for f in fires if f.worker == "worker-0"}
    twice = {j for j, n in counts.items() if n > 1}
    assert twice <= by_victim and max(counts.values()) <= 2, sorted(twice - by_victim)[:5]
    early = [f for f in fires if f.at < run_at[f.job_id]]
    assert not early, early[:3]
    assert {f.host for f in fires} == {f"host-{i}" for i in range(HOSTS)}  # every host took part
