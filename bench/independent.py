"""An independent-style harness: schedule_sdk and its peers as separate processes. Prints figures.

Run:  .venv/bin/pip install -e '.[dev,bench]'
      flock /tmp/cpu.lock .venv/bin/python bench/independent.py --workload W3 [--runs 3]
          [--systems sqlite,aps,pg-rq,celery] [--workers 1]

Unlike bench/core.py (the worker inside the bench's process, lateness read from the event),
nothing here runs inside the harness process but a resident-memory sampler:

- a **producer process** builds its own container and calls ``schedule_at`` once per job, all
  before the first due instant; it exits;
- a **worker process** (``container.worker()``; ``--workers N`` starts N of them) runs the fires;
  its listener appends ``key time.time() pid`` to a file with one ``write(2)``;
- lateness = that wall time - the job's due instant; every 0.5 s the harness samples the worker
  processes' resident memory (their children's too).

Workloads: W3 = 6,000 one-shots due evenly at 200/s; W2 = 10,000 one-shots due at one instant.
Systems (``--systems``, run alternately within each run):

- ``sqlite``: schedule_sdk on a SQLite file, ``sql`` substrate;
- ``pg``: schedule_sdk on PostgreSQL, ``sql`` substrate;
- ``pg-rq``: schedule_sdk on PostgreSQL + the ``rq`` substrate (the harness's own durable
  redis-server: ``appendonly yes``, ``appendfsync everysec``);
- ``aps``: APScheduler 3 ``BackgroundScheduler``, its ``SQLAlchemyJobStore`` on a SQLite file
  (its defaults: a pool of 10 threads), a producer process calling ``add_job`` on a paused
  scheduler, a worker process running the scheduler;
- ``celery``: Celery 5 ETA tasks (``apply_async(eta=...)``), a ``celery worker`` with the prefork
  pool of 2 (``bench/celery_app.py``), its Redis broker on database 1 of the harness's
  redis-server.

A run whose producer (with the worker's start) takes longer than the lead to the first due
instant would measure the producer, not the worker: it is made again with a longer lead.

Printed per system: fired/lost/doubled, early count, lateness p50/p99/max, drain (W2: fires/s
from the due instant to the last fire), the workers' peak RSS; then medians over the runs.

``PYTHONPATH`` chooses the schedule_sdk a producer or worker imports (``--tree DIR``, default
this checkout); bench/compare.py uses that to run two commits alternately.
``INDEP_PYSPY=DIR`` records each schedule_sdk worker with py-spy (collapsed stacks, in DIR).
PostgreSQL: a fresh database ``$SCHEDULE_INDEP_DB`` (default ``schedule_sdk_indep``) per run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from _stats import PG_ADMIN, percentile  # bench/ is on sys.path when run as a script

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SIDE = BENCH / "independent_side.py"
INDEP_DB = os.environ.get("SCHEDULE_INDEP_DB", "schedule_sdk_indep")
WORKLOADS = {"W3": (6_000, 200.0), "W2": (10_000, None)}  # jobs, rate (None: all at one instant)
LEAD = {"W3": 20.0, "W2": 25.0}  # seconds from the start of a run to the first due instant
SYSTEMS = ("sqlite", "pg", "pg-rq", "aps", "celery")


@dataclass
class Result:
    system: str
    fired: int
    lost: int
    doubled: int
    late: list[float] = field(default_factory=list)  # ms, first fire of each key
    drain: float = 0.0  # fires/s from the (first) due instant to the last fire
    rss_mb: float = 0.0
    produce_s: float = 0.0
    ready_s: float = 0.0  # seconds from the run's start until the workers were ready

    @property
    def early(self) -> int:
        return sum(1 for x in self.late if x < 0)

    def p(self, q: float) -> float:
        return percentile(self.late, q) if self.late else float("nan")

    def line(self) -> str:
        return (
            f"{self.system:7} fired {self.fired} lost {self.lost} doubled {self.doubled} early {self.early}; "
            f"lateness p50 {self.p(50):.1f} p99 {self.p(99):.1f} max {max(self.late, default=0):.1f} ms; "
            f"drain {self.drain:,.0f} fires/s; RSS {self.rss_mb:.0f} MB; produce {self.produce_s:.1f}s"
        )


class Redis:
    """A durable redis-server of the harness's own on a free loopback port."""

    def __init__(self, where: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "everysec", "--dir", str(where)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        import redis

        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def flush(self) -> None:
        import redis

        redis.Redis(port=self.port).flushall()

    def close(self) -> None:
        self.process.terminate()
        self.process.wait()


def fresh_pg() -> str:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {INDEP_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {INDEP_DB}")
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{INDEP_DB}"


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children (MB), 0 when gone."""
    total = 0
    try:
        pids = [pid]
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(c) for c in (task / "children").read_text().split()]
        for one in pids:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total / 1024


class Sampler(threading.Thread):
    """Every 0.5 s, the summed RSS of the worker processes; keeps the peak."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids, self.peak, self.done = pids, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            self.peak = max(self.peak, sum(tree_rss_mb(pid) for pid in self.pids))


class Harness:
    def __init__(self, tree: Path, workers: int) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="sdk-indep-"))
        self.redis = Redis(self.dir)
        self.tree, self.workers = tree, workers
        self.leads: dict[str, float] = {}  # a system's lead, when its producer needed a longer one

    def close(self) -> None:
        self.redis.close()

    def _env(self, events: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
        env.update(INDEP_EVENTS=str(events), PYTHONPATH=os.pathsep.join([str(self.tree), str(BENCH)]))
        return env

    def _config(self, system: str) -> tuple[str, dict[str, Any]]:
        if system == "sqlite":
            return "sdk", {"database_url": f"sqlite:///{self.dir / f'sdk-{time.time_ns()}.db'}"}
        if system == "pg":
            return "sdk", {"database_url": fresh_pg(), "substrate": "sql"}
        if system == "pg-rq":
            url = fresh_pg()
            return "sdk", {
                "database_url": url,
                "substrate": "rq",
                "redis_url": self.redis.url(0),
                "rq_queue": "indep",
            }
        if system == "aps":
            return "aps", {"url": f"sqlite:///{self.dir / f'aps-{time.time_ns()}.db'}"}
        return "celery", {"broker": self.redis.url(1)}

    def run(self, system: str, workload: str) -> Result:
        """One run of ``system``. A run whose producer (and worker start) did not finish before
        the first due instant measures the producer, not the worker: it is made again with a
        lead half as long again as that took (the longer lead is kept for the system)."""
        lead = self.leads.get(system, LEAD[workload])
        while True:
            result = self._run(system, workload, lead)
            if result.ready_s < lead:
                return result
            lead = self.leads[system] = round(result.ready_s * 1.5, 1)
            print(
                f"  ({system}: the producer and worker start took {result.ready_s:.1f} s, longer than "
                f"the lead: run again with a lead of {lead:.1f} s)",
                flush=True,
            )

    def _run(self, system: str, workload: str, lead: float) -> Result:
        self.redis.flush()
        kind, config = self._config(system)
        n, rate = WORKLOADS[workload]
        stamp = time.time_ns()
        events, dues_file, keys_file = (
            self.dir / f"{stamp}.{suffix}" for suffix in ("events", "dues", "keys")
        )
        first = time.time() + lead
        dues = [first + (i / rate if rate else 0.0) for i in range(n)]
        dues_file.write_text("\n".join(repr(d) for d in dues) + "\n")
        env, args = self._env(events), ["--config", json.dumps(config)]
        started = time.monotonic()
        subprocess.run(
            [sys.executable, str(SIDE), "produce", kind, *args,
             "--dues", str(dues_file), "--keys", str(keys_file)],
            env=env, check=True, cwd=self.dir,
        )  # fmt: skip
        produce_s = time.monotonic() - started
        workers = [self._start_worker(kind, args, env) for _ in range(self.workers if kind == "sdk" else 1)]
        ready_s = time.monotonic() - started
        sampler = Sampler([w.pid for w in workers])
        sampler.start()
        keys = Path(keys_file).read_text().split()
        due_of = dict(zip(keys, dues, strict=True))
        deadline = time.monotonic() + (dues[-1] - time.time()) + 60
        rows: list[list[str]] = []
        while time.monotonic() < deadline:
            rows = [r.split() for r in events.read_text().splitlines()] if events.exists() else []
            if len({r[0] for r in rows}) >= n:
                break
            time.sleep(0.2)
        time.sleep(0.5)  # a double fire shortly after the last first fire is still counted
        rows = [r.split() for r in events.read_text().splitlines()] if events.exists() else []
        sampler.done.set()
        for worker in workers:
            self._stop_worker(kind, worker)
        if kind == "celery":  # celery_app's task writes: index due started pid
            rows = [[r[0], r[2]] for r in rows]
        firsts: dict[str, float] = {}
        for row in rows:
            firsts.setdefault(row[0], float(row[1]))
        late = [(wall - due_of[key]) * 1000 for key, wall in firsts.items() if key in due_of]
        doubled = sum(1 for count in Counter(r[0] for r in rows).values() if count > 1)
        last = max(firsts.values(), default=first)
        return Result(
            system, fired=len(firsts), lost=n - len(firsts), doubled=doubled, late=late,
            drain=len(firsts) / max(1e-9, last - first), rss_mb=sampler.peak, produce_s=produce_s,
            ready_s=ready_s,
        )  # fmt: skip

    def _start_worker(self, kind: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
        if kind == "celery":
            config = json.loads(args[1])
            ready = self.dir / f"celery-{time.time_ns()}.ready"
            env = {**env, "CELERY_PEER_BROKER": config["broker"], "CELERY_PEER_READY": str(ready)}
            env["CELERY_PEER_EVENTS"] = env["INDEP_EVENTS"]
            process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "--pool", "prefork",
                 "--concurrency", "2", "--loglevel", "WARNING"],
                cwd=BENCH, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            deadline = time.monotonic() + 60
            while not ready.exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the celery worker failed to start")
                time.sleep(0.05)
            return process
        process = subprocess.Popen(
            [sys.executable, str(SIDE), "work", kind, *args],
            env=env, cwd=self.dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the {kind} worker failed to start")
        profile = os.environ.get("INDEP_PYSPY")  # a folder: each worker recorded by py-spy there
        if profile:  # attached once ready; it ends with the worker
            out = Path(profile) / f"{kind}-{process.pid}.txt"
            spy = str(Path(sys.executable).parent / "py-spy")
            # --gil: only the thread holding the GIL (where the CPU goes); --nonblocking: the
            # worker is not paused to be sampled
            subprocess.Popen(
                [spy, "record", "--nonblocking", "--gil", "--format", "raw", "-r", "400",
                 "-o", str(out), "-p", str(process.pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        return process

    def _stop_worker(self, kind: str, process: subprocess.Popen[str]) -> None:
        if kind == "celery":
            process.terminate()
        else:
            assert process.stdin is not None
            process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def summary(results: list[Result]) -> str:
    def med(values: list[float]) -> str:
        return " / ".join(f"{v:,.1f}" for v in values) + f" (median {statistics.median(values):,.1f})"

    lines = [
        f"  p50 ms   {med([r.p(50) for r in results])}",
        f"  p99 ms   {med([r.p(99) for r in results])}",
        f"  max ms   {med([max(r.late, default=0) for r in results])}",
        f"  fires/s  {med([r.drain for r in results])}",
        f"  RSS MB   {med([r.rss_mb for r in results])}",
        (
            f"  lost {sum(r.lost for r in results)}, doubled {sum(r.doubled for r in results)}, "
            f"early {sum(r.early for r in results)}"
        ),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="W3")
    parser.add_argument("--systems", default="sqlite,aps,pg-rq,celery")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1, help="schedule_sdk worker processes")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose schedule_sdk runs")
    args = parser.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    harness = Harness(args.tree.resolve(), args.workers)
    results: dict[str, list[Result]] = {s: [] for s in systems}
    try:
        for run in range(1, args.runs + 1):
            for system in systems:
                result = harness.run(system, args.workload)
                results[system].append(result)
                print(f"run {run} {args.workload} {result.line()}; load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        harness.close()
    print(f"{args.workload}, {args.runs} alternating runs, {args.workers} schedule_sdk worker(s):")
    for system, values in results.items():
        print(f"{system}:\n{summary(values)}")


if __name__ == "__main__":
    main()
