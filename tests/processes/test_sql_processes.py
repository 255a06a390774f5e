"""Real processes, really killed: nothing due is lost, nothing cancelled fires, no occurrence is
claimed twice by racing workers."""

from __future__ import annotations

import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, JobStatus, OneShotSpec, StoreUnavailable
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine, session_name
from schedule_sdk.ports import WorkerRegistry, require
from tests.conftest import COMBINATIONS, Backend
from tests.conftest import _backend as backend_of
from tests.support import control, services
from tests.support.waiting import wait_until
from tests.support.worker_process import WorkerProcess, fired


def settle(h, events: Path) -> str:
    """Wait until the worker processes have fired everything due before now: a marker job due at
    once has fired (workers claim in due order). Returns the marker's id, for the caller to leave
    out of its counts. Used for "nothing fires twice" checks instead of sleeping a while."""
    marker = h.service.schedule_at(due(0.02)).id
    assert wait_until(lambda: fired(events)[marker] >= 1, 30), "the marker job never fired"
    return marker


def due(seconds: float) -> OneShotSpec:
    return OneShotSpec(
        topic="faults.job", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC"
    )


@pytest.mark.slow
@pytest.mark.every_code_path  # each store's claims, each substrate's fire path
def test_sigkill_mid_fire_loses_nothing_and_cancelled_jobs_never_fire(backend, tmp_path):
    events = tmp_path / "events.log"
    h = backend.harness(lease_seconds=1.5)
    service = h.service
    jobs = [service.schedule_at(due(0.5)).id for _ in range(20)]
    cancelled = [service.schedule_at(due(0.6)).id for _ in range(3)]
    for job_id in cancelled:
        service.cancel(job_id)
    victim = WorkerProcess(backend, events, lease_seconds=1.5, listener_sleep=2.0, worker_concurrency=4)
    assert wait_until(lambda: any(h.job(j).status is JobStatus.ACTIVE for j in jobs), 10)
    victim.kill()  # mid-fire: claims are held, listeners have not finished
    assert sum(fired(events).values()) < len(jobs)
    survivor = WorkerProcess(backend, events, lease_seconds=1.5)
    try:
        assert wait_until(lambda: all(h.job(j).status is JobStatus.COMPLETED for j in jobs), 30)
    finally:
        assert survivor.terminate() == 0
    counts = fired(events)
    assert all(counts[j] >= 1 for j in jobs), counts  # at least once, none lost
    assert all(counts[j] == 0 for j in cancelled)
    assert all(h.job(j).status is JobStatus.CANCELLED for j in cancelled)


@pytest.mark.slow
@pytest.mark.every_code_path  # each store's claims, each substrate's fire path
def test_two_racing_worker_processes_fire_each_occurrence_once(backend, tmp_path):
    events = tmp_path / "events.log"
    # 20 ms listeners: one process alone needs 1.5 s for the 300 fires (4 at a time), so the other
    # takes part even if a loaded machine holds it back for a while (without them one process
    # could drain them all in the 0.4 s they fall due over)
    workers = [WorkerProcess(backend, events, worker_concurrency=4, listener_sleep=0.02) for _ in range(2)]
    h = backend.harness()
    try:
        jobs = [h.service.schedule_at(due(1.0 + (i % 20) * 0.02)).id for i in range(300)]
        assert wait_until(lambda: sum(fired(events).values()) >= len(jobs), 60)
        marker = settle(h, events)
    finally:
        codes = [w.terminate() for w in workers]
    counts = fired(events)
    del counts[marker]
    assert codes == [0, 0]
    assert sorted(counts) == sorted(jobs) and set(counts.values()) == {1}, counts.most_common(3)
    pids = Counter(line.split()[3] for line in events.read_text().splitlines())
    assert len(pids) == 2, pids  # both processes took part


@pytest.fixture(params=["sql", "rq"])
def private_postgres_backend(request, tmp_path) -> Iterator[tuple[Backend, control.PrivatePostgres]]:
    """The PostgreSQL store on each substrate, on a server of the test's own that it may stop."""
    server = control.PrivatePostgres()
    # asynchronous commits (claims, outcomes) stay unwritten until a synchronous one (a beat)
    # or a shutdown flushes them, so a crash right after one loses it
    server.settings["wal_writer_delay"] = "10000"
    backend = None
    try:
        server.start()
        url = server.create_database("sdk")
        engine = make_engine(url)
        schema.upgrade(engine)
        engine.dispose()
        redis_url = None
        if request.param == "rq":
            redis_url = request.getfixturevalue("redis_base_url")
            services.RedisDbs.flush(redis_url)
        backend = Backend(f"private-postgres-{request.param}", "postgres", request.param, url, redis_url)
        yield backend, server
    finally:
        for harness in backend.harnesses if backend else []:
            harness.close()
        server.close()


@pytest.mark.slow
def test_postgres_stopped_mid_run(private_postgres_backend):
    backend, server = private_postgres_backend
    h = backend.harness(poll_interval=0.2).start()
    before = h.service.schedule_at(due(1.0))
    server.stop()
    try:
        with pytest.raises(StoreUnavailable) as raised:
            h.service.schedule_at(due(5.0))
        assert raised.value.code == "SCHEDULE_STORE_UNAVAILABLE"
        # the job falls due while the database is down
        assert wait_until(lambda: datetime.now(UTC) > before.run_at + timedelta(seconds=0.5), 5)
    finally:
        server.start()
    h.wait_events(before.id, 1, timeout=30)
    assert h.wait_status(before.id, "completed").occurrence_count == 1
    assert len(h.service.list(limit=100).items) == 1  # the refused call wrote nothing


def _row(server: control.PrivatePostgres, job_id: str) -> tuple[str, str | None]:
    """The job's status and holder, read on a connection of its own (the store's may be cut)."""
    with psycopg.connect(server.admin.rsplit("/", 1)[0] + "/sdk", autocommit=True) as conn:
        found = conn.execute("SELECT status, claimed_by FROM schedule_jobs WHERE id = %s", (job_id,))
        row = found.fetchone()
    assert row is not None, job_id
    return row[0], row[1]


def _wait_row(server: control.PrivatePostgres, job_id: str, status: str, timeout: float, every: float = 0.01):
    assert wait_until(lambda: _row(server, job_id)[0] == status, timeout, every), _row(server, job_id)


def _crash_when(h, server: control.PrivatePostgres, seen: str, left: str) -> str:
    """Schedule a job due soon and crash the server the moment its row is ``seen`` (its claim
    or outcome committed, not flushed); return a job whose row the crash left ``left`` (tried
    again in the rare case a beat's flush made the commit durable in between)."""
    for _ in range(5):
        job_id = _retried(lambda: h.service.schedule_at(due(0.5)).id)  # the pool's sessions were cut
        _wait_row(server, job_id, seen, 30, every=0.001)
        server.crash()
        if _row(server, job_id)[0] == left:
            return job_id
        _wait_row(server, job_id, "completed", 60)
    pytest.fail(f"no crash left a {left} row")


def _retried(call):
    """``call()``, again while it meets the sessions a server restart cut (one failure each)."""
    for _ in range(20):
        try:
            return call()
        except StoreUnavailable:
            continue
    return call()


@pytest.mark.slow
def test_a_claim_lost_in_a_postgres_crash_fires_soon_after(private_postgres_backend):
    """The crash loses a claim: the row is pending again, and on ``rq`` the queue entry it was
    claimed from is gone; the job fires within seconds, not at the next reconcile."""
    backend, server = private_postgres_backend
    h = backend.harness(lease_seconds=60.0)  # the fire never waits for a lease or a reconcile
    h.listen(SCHEDULE_ARRIVED_EVENT, lambda event: time.sleep(1.0))  # the row stays active a while
    h.start()
    job_id = _crash_when(h, server, "active", "pending")
    _wait_row(server, job_id, "completed", 20)


@pytest.mark.slow
def test_an_outcome_lost_in_a_postgres_crash_does_not_hold_the_claim_for_the_lease(private_postgres_backend):
    """The crash loses an outcome: the row is active again, claimed by the live worker, which
    does not hold that fire any more; it releases the claim and the job fires again at once."""
    backend, server = private_postgres_backend
    h = backend.harness(lease_seconds=60.0)
    h.listen(SCHEDULE_ARRIVED_EVENT, lambda event: time.sleep(1.5))  # a beat flushes the claim meanwhile
    h.start()
    job_id = _crash_when(h, server, "completed", "active")
    assert _row(server, job_id)[1] == h.worker.dispatcher.worker_id
    _wait_row(server, job_id, "completed", 20)
    assert len(h.events_for(job_id)) >= 2  # fired again: at least once


# -- dead workers are noticed through the worker registry, not the lease ------------------
# The lease is 60 s in these tests, so a job that completes within seconds was released by a live
# worker that declared its holder dead.

LONG_LEASE = 60.0


def _claimed_by(h, jobs: list[str], worker_id: str) -> list[str]:
    return [j for j in jobs if (row := h.job(j)).status is JobStatus.ACTIVE and row.claimed_by == worker_id]


def _start_victim_and_survivor(backend, events: Path, dead_after: float, listener_sleep: float = 2.5):
    """A slow victim holding fires, then a fast survivor; returns them and the victim's held jobs."""
    h = backend.harness(lease_seconds=LONG_LEASE, dead_after=dead_after)
    victim = WorkerProcess(
        backend,
        events,
        worker_id="victim",
        lease_seconds=LONG_LEASE,
        dead_after=dead_after,
        listener_sleep=listener_sleep,
        worker_concurrency=4,
    )
    jobs = [h.service.schedule_at(due(0.3)).id for _ in range(12)]
    assert wait_until(lambda: len(_claimed_by(h, jobs, "victim")) >= 4, 15)
    survivor = WorkerProcess(backend, events, lease_seconds=LONG_LEASE, dead_after=dead_after)
    return h, victim, survivor, jobs, _claimed_by(h, jobs, "victim")


@pytest.mark.slow
def test_a_killed_workers_fires_are_released_by_a_live_worker_long_before_its_lease_ends(backend, tmp_path):
    events = tmp_path / "events.log"
    h, victim, survivor, jobs, held = _start_victim_and_survivor(backend, events, dead_after=2.0)
    try:
        victim.kill()
        # dead_after, plus a beat of the survivor, plus a generous margin for a loaded machine: far
        # less than the lease, so only the dead-worker takeover can release them in time
        assert wait_until(lambda: all(h.job(j).status is JobStatus.COMPLETED for j in jobs), 2.0 + 1 + 12)
    finally:
        assert survivor.terminate() == 0
    counts = fired(events)
    assert all(counts[j] >= 1 for j in jobs), counts
    assert all(h.job(j).occurrence_count == 1 for j in held)


@pytest.mark.slow
@pytest.mark.timeout(90)  # two worker processes, 4 s listeners, a 3 s pause and the settling marker
def test_a_worker_paused_for_less_than_dead_after_fires_nothing_twice(backend, tmp_path):
    events = tmp_path / "events.log"
    # listeners of 4 s: the victim still holds its first fires while the survivor starts
    h, victim, survivor, jobs, _ = _start_victim_and_survivor(
        backend, events, dead_after=6.0, listener_sleep=4.0
    )
    try:
        victim.pause()
        stopped = datetime.now(UTC)
        # what it holds is read once it is stopped: a fire it completed a moment before the stop
        # is no longer its own, and must not be mistaken for one taken from it
        held = _claimed_by(h, jobs, "victim")
        assert held, "the victim held nothing when it was paused"
        # paused 3 s: less than dead_after minus one beat interval (1 s)
        assert wait_until(lambda: datetime.now(UTC) > stopped + timedelta(seconds=3), 5)
        assert all(h.job(j).claimed_by == "victim" for j in held)  # nobody released them
        victim.proc.send_signal(signal.SIGCONT)
        assert wait_until(lambda: all(h.job(j).status is JobStatus.COMPLETED for j in jobs), 30)
        marker = settle(h, events)
    finally:
        victim.proc.send_signal(signal.SIGCONT)
        codes = [victim.terminate(), survivor.terminate()]
    counts = fired(events)
    del counts[marker]
    assert codes == [0, 0]
    assert sorted(counts) == sorted(jobs) and set(counts.values()) == {1}, counts


def _idle_since(h, worker_id: str, since: datetime) -> bool:
    """``worker_id`` beat after ``since`` holding no fire (neither queued nor running)."""
    row = next((w for w in require(h.store, WorkerRegistry, "the test").workers() if w.id == worker_id), None)
    return row is not None and row.last_beat > since and row.in_flight == 0


def _pause_outside_a_write(backend: Backend, victim: WorkerProcess) -> None:
    """Pause ``victim``; on SQLite, only at an instant it holds no write transaction: a process
    paused inside one holds the database's one write lock, and every writer waits until it resumes
    (on PostgreSQL the peer that declares it dead ends such a session: see the next test)."""
    victim.pause()
    if backend.store != "sqlite":
        return
    path = sa.make_url(backend.database_url).database
    assert path

    def write_lock_free() -> bool:
        db = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:  # held: by the victim, or by a live process for a moment
            victim.proc.send_signal(signal.SIGCONT)
            time.sleep(0.01)
            victim.pause()
            return False
        finally:
            db.close()

    assert wait_until(write_lock_free, 30), "the victim never paused outside a write transaction"


def _paused_holding_locks(
    h, victim: WorkerProcess, worker_id: str, held: list[str], within: float = 60
) -> bool:
    """Pause ``victim`` inside a transaction that holds some of ``held`` locked (a lease renewal
    between its UPDATE and its COMMIT): watch its sessions for one in a transaction that wrote,
    stop it at once, and keep it stopped if the rows are indeed locked (else resume and watch
    again). True once caught; False if nothing was caught within ``within`` seconds."""
    sessions = "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name AND "
    writing = sa.text(sessions + "backend_xid IS NOT NULL AND state <> 'idle'")
    active = sa.text(sessions + "state = 'active'")
    idle_in_transaction = sa.text(sessions + "state = 'idle in transaction'")
    locked = sa.text("SELECT id FROM schedule_jobs WHERE id = ANY(:ids) FOR UPDATE SKIP LOCKED")
    name = {"name": session_name(worker_id)}
    deadline = time.monotonic() + within
    # pg_stat_activity is read once per transaction: each look is a transaction of its own
    with h.store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        while time.monotonic() < deadline:
            if not conn.execute(writing, name).scalar():
                continue
            victim.pause()
            # what the server was running for it finishes; a COMMIT it sent ends its transaction
            assert wait_until(lambda: not conn.execute(active, name).scalar(), 5, every=0.01)
            if conn.execute(idle_in_transaction, name).scalar():
                if len(conn.execute(locked, {"ids": held}).all()) < len(held):
                    return True
            victim.proc.send_signal(signal.SIGCONT)
    return False


#: A server's transaction paused mid-claim: directly and through PgBouncer, each with one substrate.
@pytest.fixture(params=[p for p in COMBINATIONS if p.id in ("postgres-sql", "pgbouncer-rq")])
def server_backend(request: pytest.FixtureRequest, database_url_factory) -> Iterator[Backend]:
    """The backends whose store is a database server (a paused SQLite writer holds the whole
    file: there is no session of its own to end)."""
    backend = backend_of(request, database_url_factory, *request.param)
    yield backend
    for harness in backend.harnesses:
        harness.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_worker_paused_inside_a_transaction_loses_its_claims_once_declared_dead(server_backend, tmp_path):
    """A worker stopped between two statements of a transaction keeps it open, with the row locks
    of the claims it was renewing; the peer that declares it dead ends that session, so those
    claims are released with the rest and fire long before their lease ends."""
    events = tmp_path / "events.log"
    # listeners of 60 s: the victim holds its claims (and renews them) for the whole test
    h, victim, survivor, jobs, held = _start_victim_and_survivor(
        server_backend, events, dead_after=2.0, listener_sleep=60.0
    )
    try:
        caught = _paused_holding_locks(h, victim, "victim", held)
        assert caught, "never caught the victim inside a transaction"
        assert wait_until(lambda: all(h.job(j).status is JobStatus.COMPLETED for j in jobs), 2.0 + 1 + 12)
    finally:
        victim.kill()
        assert survivor.terminate() == 0
    assert all(h.job(j).occurrence_count == 1 for j in jobs)
    assert sorted(fired(events)) == sorted(jobs)


@pytest.mark.slow
def test_a_worker_paused_longer_than_dead_after_repeats_its_in_flight_fires_at_most_once(backend, tmp_path):
    events = tmp_path / "events.log"
    h, victim, survivor, jobs, held = _start_victim_and_survivor(backend, events, dead_after=2.0)
    try:
        _pause_outside_a_write(backend, victim)
        # declared dead: its fires are released and fired by the survivor meanwhile
        assert wait_until(lambda: all(h.job(j).status is JobStatus.COMPLETED for j in jobs), 2.0 + 1 + 12)
        resumed = datetime.now(UTC)
        victim.proc.send_signal(signal.SIGCONT)  # its listeners finish: those fires repeat
        # what it held when it was paused has run (or was dropped) once it beats holding nothing:
        # only then are the counts below final (held was read before the pause, so some of it may
        # have completed before and fires only once)
        assert wait_until(lambda: _idle_since(h, "victim", resumed), 20), (
            fired(events),
            held,
            victim.log()[-4000:],
        )
        marker = settle(h, events)
    finally:
        victim.proc.send_signal(signal.SIGCONT)
        codes = [victim.terminate(), survivor.terminate()]
    counts = fired(events)
    del counts[marker]
    assert codes == [0, 0]
    assert sorted(counts) == sorted(jobs), counts
    # each process fired each job at most once: a held fire ran in the victim and again in the
    # survivor, never more (read from the fires' own pids, not from a look at the claims, which
    # cannot be taken at the very instant of the pause)
    by_process = Counter((line.split()[0], line.split()[3]) for line in events.read_text().splitlines())
    assert set(by_process.values()) == {1}, by_process
    victims = {j for j, pid in by_process if pid == str(victim.proc.pid)}
    assert all(counts[j] == 1 for j in jobs if j not in victims), counts
    assert all(counts[j] <= 2 for j in jobs), counts  # at least once; repeated at most once
    assert all(h.job(j).status is JobStatus.COMPLETED and h.job(j).occurrence_count == 1 for j in jobs)
