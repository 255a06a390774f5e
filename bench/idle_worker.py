"""An idle ``schedule-sdk worker``: its memory and the CPU it spends while nothing is due.

Run:  flock /tmp/cpu.lock .venv/bin/python bench/idle_worker.py [--systems sqlite,pg]
          [--base main] [--w4] [--seconds 30] [--settle 5] [--runs 2] [--breakdown]

Each run starts a real worker (``python -m schedule_sdk worker``, the console script's code) as a
subprocess on a fresh database, a SQLite file in a temporary folder or a new PostgreSQL database
``$SCHEDULE_IDLE_DB`` (default ``schedule_sdk_idle``) on 127.0.0.1:5432, waits for the line it
writes once started, lets it settle ``--settle`` seconds, then reads:

- ``RSS``: ``VmRSS`` of ``/proc/PID/status``; ``PSS``: ``Pss`` of ``/proc/PID/smaps_rollup``
  (shared library pages divided among the processes that map them), in MB;
- ``CPU %``: ``utime + stime`` of ``/proc/PID/stat`` over ``--seconds`` seconds, in % of one core;
- ``threads``: the process's threads at the end.

The schema is migrated first (``schedule-sdk db upgrade``), as for a worker restarted on a
database at head; ``--first-start`` lets the worker migrate the new database itself, which loads
Alembic (and with it Mako and the PostgreSQL dialect) for the life of the process.

``--w4``: W4, 100,000 pending one-shots due an hour ahead, are scheduled (``schedule_many``, by
the same tree's code) before the worker starts, so the figures are those of a worker with a large
backlog that is not yet due. ``--base REV``: each run alternates the working tree and ``REV``
(checked out with ``git worktree add --detach`` in a temporary directory, imported through
``PYTHONPATH``), so both see the same machine. Prints each run and the medians.

``--breakdown`` (working tree only): starts the worker in a wrapper that, once it settled, writes
what its memory is: the resident set from ``smaps_rollup`` by kind, the imported modules grouped by
top-level package (their count and the bytes tracemalloc attributes to their import), the threads
by name, and the ``gc``-tracked objects.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from _stats import PG_ADMIN  # bench/ is on sys.path when run as a script
from compare import WORKTREE, Tree

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
IDLE_DB = os.environ.get("SCHEDULE_IDLE_DB", "schedule_sdk_idle")
W4_JOBS = 100_000
TICK = os.sysconf("SC_CLK_TCK")

PRODUCE = """
import sys
from datetime import UTC, datetime, timedelta
from schedule_sdk import OneShotSpec, ScheduleContainer
container = ScheduleContainer()
container.config.from_dict({"database_url": sys.argv[1]})
service = container.schedule_service()
due = datetime.now(UTC) + timedelta(hours=1)
n = int(sys.argv[2])
for start in range(0, n, 5000):
    service.schedule_many(
        [OneShotSpec(topic="bench.w4", run_at=due + timedelta(milliseconds=i), timezone="UTC")
         for i in range(start, min(n, start + 5000))]
    )
container.shutdown_resources()
"""

#: The wrapper of ``--breakdown``: runs the CLI's worker, and once the harness creates the file
#: named by ``IDLE_REPORT_AT`` writes its modules (in import order) and threads to ``IDLE_REPORT``.
BREAKDOWN = """
import os, sys, threading, time
def report():
    import collections, gc, json
    at = os.environ["IDLE_REPORT_AT"]
    while not os.path.exists(at):
        time.sleep(0.2)
    threads = collections.Counter(t.name.rstrip("0123456789") for t in threading.enumerate())
    out = {"modules": list(sys.modules), "threads": dict(threads), "gc_objects": len(gc.get_objects())}
    with open(os.environ["IDLE_REPORT"], "w") as f:
        json.dump(out, f)
threading.Thread(target=report, name="bench-report", daemon=True).start()
from schedule_sdk.entrypoints.cli import main
sys.exit(main(["worker"]))
"""

#: Imports the worker's modules again in a fresh interpreter, in the worker's order, and writes the
#: resident memory each module's own loading added (its code, its body's objects, its shared
#: library), less what the imports it made added, summed by top-level package.
REPLAY = """
import importlib, importlib._bootstrap as bootstrap, json, sys
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
own, counts, nested, mine = {}, {}, [0], {}
load = bootstrap._load_unlocked
def measured(spec):
    before = rss()
    nested.append(0)
    try:
        return load(spec)
    finally:
        inner, added = nested.pop(), rss() - before
        top = spec.name.split(".")[0]
        own[top] = own.get(top, 0) + added - inner
        if top == "schedule_sdk":
            mine[spec.name] = added - inner
        counts[top] = counts.get(top, 0) + 1
        nested[-1] += added
bootstrap._load_unlocked = measured
start = rss()
# dependency-injector the way the package imports it (without the web frameworks and pydantic)
importlib.import_module("schedule_sdk.bootstrap.injector")
for name in json.load(open(sys.argv[1]))["modules"]:
    if name not in sys.modules and not name.startswith("__"):
        try:
            importlib.import_module(name)
        except Exception:
            pass
json.dump({"start": start, "added": own, "counts": counts, "end": rss(), "mine": mine}, sys.stdout)
"""


@dataclass
class Result:
    label: str
    system: str
    rss_mb: float
    pss_mb: float
    cpu_pct: float
    threads: int

    def line(self) -> str:
        return (
            f"{self.label:24} {self.system:7} RSS {self.rss_mb:5.1f} MB  PSS {self.pss_mb:5.1f} MB  "
            f"CPU {self.cpu_pct:5.2f} %  threads {self.threads}"
        )


def fresh_pg() -> str:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {IDLE_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {IDLE_DB}")
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{IDLE_DB}"


def status_kb(pid: int, field: str, name: str = "status") -> int:
    for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat(5))


class Worker:
    """A ``schedule-sdk worker`` of ``tree`` on ``url``, started and waited for."""

    def __init__(
        self, tree: Path, url: str, where: Path, code: str | None = None, env: dict[str, str] | None = None
    ):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")} | (env or {})
        env.update(PYTHONPATH=str(tree), SCHEDULE_DATABASE_URL=url, SCHEDULE_SUBSTRATE="sql")
        command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "schedule_sdk", "worker"]
        self.log = where / f"worker-{time.time_ns()}.log"
        self._out = self.log.open("w")
        self.process = subprocess.Popen(
            command, env=env, cwd=where, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._out
        )
        deadline = time.monotonic() + 120
        while "started (" not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the worker failed to start:\n{self.log.read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._out.close()


def database(system: str, where: Path) -> str:
    if system == "sqlite":
        return f"sqlite:///{where / f'idle-{time.time_ns()}.db'}"
    return fresh_pg()


def migrate(tree: Path, url: str, where: Path) -> None:
    """``schedule-sdk db upgrade`` by ``tree``'s code: the worker then starts on a schema at head,
    as a worker restarted in production does (the first start on a new database also migrates,
    and holds Alembic's modules from then on: ``--first-start`` measures that one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
    env.update(PYTHONPATH=str(tree), SCHEDULE_DATABASE_URL=url)
    command = [sys.executable, "-m", "schedule_sdk", "db", "upgrade"]
    quiet = subprocess.DEVNULL
    subprocess.run(command, env=env, cwd=where, check=True, stdout=quiet, stderr=quiet)


def produce(tree: Path, url: str, where: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
    env["PYTHONPATH"] = str(tree)
    subprocess.run([sys.executable, "-c", PRODUCE, url, str(W4_JOBS)], env=env, cwd=where, check=True)


def measure(tree: Tree, system: str, args: argparse.Namespace, where: Path) -> Result:
    url = database(system, where)
    if not args.first_start:
        migrate(tree.path, url, where)
    if args.w4:
        produce(tree.path, url, where)
    worker = Worker(tree.path, url, where)
    try:
        time.sleep(args.settle)
        pid = worker.process.pid
        before, started = cpu_ticks(pid), time.monotonic()
        time.sleep(args.seconds)
        ticks, elapsed = cpu_ticks(pid) - before, time.monotonic() - started
        rss = status_kb(pid, "VmRSS") / 1024
        pss = status_kb(pid, "Pss", "smaps_rollup") / 1024
        threads = status_kb(pid, "Threads")
    finally:
        worker.stop()
    return Result(tree.label, system, rss, pss, 100 * ticks / TICK / elapsed, threads)


def breakdown(system: str, args: argparse.Namespace, where: Path) -> None:
    url = database(system, where)
    if not args.first_start:
        migrate(ROOT, url, where)
    if args.w4:
        produce(ROOT, url, where)
    report, at = where / "breakdown.json", where / "breakdown.now"
    worker = Worker(ROOT, url, where, BREAKDOWN, {"IDLE_REPORT": str(report), "IDLE_REPORT_AT": str(at)})
    try:
        time.sleep(args.settle)
        pid = worker.process.pid
        keys = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Shared_Clean", "Private_Clean", "Private_Dirty")
        rollup = {key: status_kb(pid, key, "smaps_rollup") / 1024 for key in keys}
        at.touch()
        deadline = time.monotonic() + 60
        while not report.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)
        data = json.loads(report.read_text())
        libs = mapped_libraries(pid)
        anon = anonymous_kb(pid) / 1024
    finally:
        worker.stop()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")} | {"PYTHONPATH": str(ROOT)}
    replay = json.loads(
        subprocess.run(
            [sys.executable, "-c", REPLAY, str(report)], env=env, cwd=where, check=True, capture_output=True
        ).stdout
    )
    bare = replay["start"] / 1024
    imported = (replay["end"] - replay["start"]) / 1024
    print(f"\n{system}: what the idle worker's {rollup['Rss']:.1f} MB are")
    print("  smaps_rollup: " + ", ".join(f"{k} {v:.1f}" for k, v in rollup.items()) + " (MB)")
    threads = data["threads"]
    print(f"  threads: {sum(threads.values())} ({', '.join(f'{k} x{n}' for k, n in threads.items())})")
    print(f"  modules: {len(data['modules'])}; gc-tracked objects: {data['gc_objects']:,}")
    print(f"  the interpreter at start (python -c, site): {bare:.1f} MB")
    print(f"  importing the worker's modules again: {imported:.1f} MB; by top-level package (each")
    print("  module's own loading: its code, the objects its body made, its shared library):")
    added = sorted(replay["added"].items(), key=lambda kv: -kv[1])
    for name, kb in added[: args.top]:
        print(f"    {name:28} {kb / 1024:6.2f} MB  {replay['counts'][name]:4}")
    rest = added[args.top :]
    rest_n = sum(replay["counts"][n] for n, _ in rest)
    print(f"    {'(others)':28} {sum(kb for _, kb in rest) / 1024:6.2f} MB  {rest_n:4}")
    mine = sorted(replay["mine"].items(), key=lambda kv: -kv[1])[:8]
    print(
        "  schedule_sdk's largest: "
        + ", ".join(f"{n.removeprefix('schedule_sdk.')} {kb / 1024:.1f}" for n, kb in mine)
    )
    left = rollup["Rss"] - bare - imported
    print(
        f"  the rest ({left:.1f} MB): the running worker's heap (connections, caches, compiled statements),"
    )
    print(f"  thread stacks and arenas; anonymous memory in all: {anon:.1f} MB")
    print("  shared libraries mapped (RSS MB): " + ", ".join(f"{n} {mb:.1f}" for n, mb in libs[:12]))


def anonymous_kb(pid: int) -> int:
    """Resident kB of the mappings backed by no file (heap, arenas, thread stacks)."""
    total, anonymous = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
            anonymous = len(parts) < 6 or not parts[5].startswith("/")
        elif anonymous and parts and parts[0] == "Rss:":
            total += int(parts[1])
    return total


def mapped_libraries(pid: int) -> list[tuple[str, float]]:
    """Resident MB per mapped file (``.so`` files, the interpreter), the largest first."""
    sizes: dict[str, int] = {}
    current = None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
            current = Path(parts[5]).name if len(parts) >= 6 and parts[5].startswith("/") else None
        elif current and parts and parts[0] == "Rss:":
            sizes[current] = sizes.get(current, 0) + int(parts[1])
    return sorted(((n, kb / 1024) for n, kb in sizes.items()), key=lambda x: -x[1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--systems", default="sqlite,pg")
    parser.add_argument("--base", help="a commit to alternate with the working tree")
    parser.add_argument("--w4", action="store_true", help="100,000 pending one-shots due an hour ahead")
    parser.add_argument("--seconds", type=float, default=30.0, help="the CPU window")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after the start, before measuring")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--first-start", action="store_true", help="the worker migrates a new database itself (loads Alembic)"
    )
    parser.add_argument("--breakdown", action="store_true", help="what the MB are (working tree)")
    parser.add_argument("--top", type=int, default=15, help="packages shown by --breakdown")
    args = parser.parse_args()
    systems = args.systems.split(",")
    where = Path(tempfile.mkdtemp(prefix="sdk-idle-"))
    if args.breakdown:
        for system in systems:
            breakdown(system, args, where)
        return
    trees = [Tree(WORKTREE)] + ([Tree(args.base)] if args.base else [])
    results: list[Result] = []
    try:
        print(
            f"idle worker{' with W4' if args.w4 else ''}: settle {args.settle:g}s, CPU over {args.seconds:g}s"
        )
        for _ in range(args.runs):
            for system in systems:
                for tree in trees[::-1]:  # base first, then the working tree
                    result = measure(tree, system, args, where)
                    results.append(result)
                    print(result.line(), flush=True)
    finally:
        for tree in trees:
            tree.remove()
    print("\nmedians:")
    print(f"{'tree':24} {'system':7} {'RSS MB':>7} {'PSS MB':>7} {'CPU %':>6} {'threads':>7}")
    for system in systems:
        for tree in trees:
            mine = [r for r in results if r.system == system and r.label == tree.label]
            print(
                f"{tree.label:24} {system:7} {statistics.median(r.rss_mb for r in mine):7.1f} "
                f"{statistics.median(r.pss_mb for r in mine):7.1f} "
                f"{statistics.median(r.cpu_pct for r in mine):6.2f} "
                f"{statistics.median(r.threads for r in mine):7.0f}"
            )


if __name__ == "__main__":
    main()
