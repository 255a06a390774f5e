"""W5, recovery from a killed worker. Prints figures.

Run:  .venv/bin/python bench/recovery.py [--combos sqlite-sql,postgres-sql,sqlite-rq,postgres-rq]
                                         [--peer] [--runs N] [--dead-after S]

W5  2,000 one-shots due within 5 s; one ``schedule-sdk worker`` process fires them; when half
    have fired it is killed with ``kill -9`` and a new one is started at once.
    -> time from the restart to the last fire, lost jobs (never fired), repeated fires.
W5p (``--peer``) the same with two workers and no restart: one is killed, the other (which on
    this host notices the dead process at once) carries on -> time from the kill to the last fire.

The restart figure includes the new process's start-up (imports, migrations check, boot
reconcile). Without dead-worker detection, its claims would wait for their lease (30 s). rq combos use
a redis-server of their own (as bench/rq_bench.py does).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rq_bench import ROOT, Env, spec  # bench/ is on sys.path when run as a script

from schedule_sdk.ports import Occurrence

N = 2000
SPREAD = 5.0


def start_worker(settings: dict[str, object], events: Path) -> subprocess.Popen[str]:
    """A ``schedule-sdk worker`` process; its stderr goes to ``<events>.stderr`` (after the
    started line, which :func:`wait_started` reads)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
    env.update({f"SCHEDULE_{k.upper()}": str(v) for k, v in settings.items() if v is not None})
    env.update(SCHEDULE_LISTENER_MODULES="bench.recovery_listener", RECOVERY_BENCH_EVENTS=str(events))
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(
        [sys.executable, "-m", "schedule_sdk", "worker"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=open(f"{events}.stderr", "a"), text=True,
    )  # fmt: skip


def wait_started(worker: subprocess.Popen[str], events: Path, count: int) -> None:
    log = Path(f"{events}.stderr")
    while (log.read_text() if log.exists() else "").count(" started (") < count:
        if worker.poll() is not None:
            raise RuntimeError("worker failed to start: " + log.read_text())
        time.sleep(0.05)


def read(events: Path) -> list[tuple[str, float, float]]:
    """``(job id, due, fired)`` per fire."""
    rows = events.read_text().splitlines() if events.exists() else []
    return [(a, float(b), float(c)) for a, b, c in (r.split() for r in rows if r.count(" ") == 2)]


def wait_fired(events: Path, ids: set[str], count: int, timeout: float) -> list[tuple[str, float, float]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = read(events)
        if len({row[0] for row in rows} & ids) >= count:
            return rows
        time.sleep(0.02)
    return read(events)


def w5(env: Env, substrate: str, peer: bool, dead_after: float) -> str:
    settings = env.settings()
    settings.update(substrate=substrate, dead_after=dead_after, auto_migrate=True)
    if substrate == "sql":
        settings["redis_url"] = None
    container = env.container(settings)
    events = env.dir / f"events-{time.time_ns()}.log"
    workers = [start_worker(settings, events) for _ in range(2 if peer else 1)]
    try:
        return _run(container, settings, events, workers, peer, dead_after, f"{env.store}-{substrate}")
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
                worker.wait(timeout=30)
        container.shutdown_resources()


def _run(container, settings, events, workers, peer, dead_after, combo) -> str:  # type: ignore[no-untyped-def]
    for count, worker in enumerate(workers, 1):
        wait_started(worker, events, count)
    service, store, queue = container.schedule_service(), container.store(), container.queue()
    start = datetime.now(UTC) + timedelta(seconds=2.0)
    jobs = [service._new_job(spec(start + timedelta(seconds=SPREAD * n / N))) for n in range(N)]
    occurrences = [Occurrence.of(job) for job in jobs]
    with store.transaction() as tx:  # the write order, in one transaction
        tx.insert_many(jobs)
        queue.enqueue(occurrences)
    queue.committed(occurrences)
    ids = {job.id for job in jobs}
    wait_fired(events, ids, N // 2, 60)
    victim = workers[0]
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    t_kill = time.time()
    if not peer:
        workers[0] = start_worker(settings, events)
    t_restart = time.time()
    rows = wait_fired(events, ids, N, 90)
    fired = [row for row in rows if row[0] in ids]
    distinct = {row[0] for row in fired}
    last = max(at for _, _, at in fired)
    late = max(at - due for _, due, at in fired)
    last_due = max(due for _, due, _ in fired)
    what = "kill" if peer else "restart"
    since = last - (t_kill if peer else t_restart)
    lost = sorted(ids - distinct)
    states = {}
    for job_id in lost:
        job = container.store().get(job_id)
        states[job_id] = (job.status.value, job.claimed_by) if job else None
    return (
        f"W5{'p' if peer else ''} [{combo}] dead_after={dead_after:g}: last fire {since:.2f} s after the "
        f"{what} (last due {last_due - (t_kill if peer else t_restart):.2f} s after it), "
        f"max lateness {late:.2f} s; lost {len(lost)}, repeated {len(fired) - len(distinct)}"
        + (f" {states}" if states else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--combos", default="sqlite-sql,postgres-sql,sqlite-rq,postgres-rq")
    parser.add_argument("--peer", action="store_true", help="two workers, kill one, no restart")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--dead-after", type=float, default=10.0)
    args = parser.parse_args()
    for combo in args.combos.split(","):
        store, substrate = combo.split("-")
        env = Env(store)
        try:
            for _ in range(args.runs):
                print(w5(env, substrate, args.peer, args.dead_after), flush=True)
        finally:
            env.close()


if __name__ == "__main__":
    main()
