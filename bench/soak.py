"""The crash soak: trial after trial, an app schedules and cancels jobs while a fault chosen at random
hits it; then the whole crash contract is checked. Not part of the test run. Prints a table.

Run:  .venv/bin/python bench/soak.py [--minutes N | --trials N] [--backends a,b,...] [--seed S]
                                     [--faults kill,...] [--apps 1] [--schedule 6] [--rate 20]
                                     [--wait 30] [--keep] [--judge DIR]

Backends: sqlite-sql, postgres-sql, postgres-rq, pgbouncer-sql, pgbouncer-rq, sentinel-rq.
PostgreSQL is a cluster of the soak's own (port 55432; pgbouncer-* go through a PgBouncer of its
own, port 56432, transaction pooling); rq uses a claimed db of the shared Redis (6379), or for
sentinel-rq a primary, replica and three Sentinels of each trial's own. See bench/soak_services.py.

A trial: a fresh database (and Redis db), one app process (``--apps`` of them side by side; a kill
hits one at random) (bench/soak_app.py: a worker with the
default settings, scheduling one-shots, intervals and crons for ``--schedule`` seconds and
cancelling about 10 %, a third of those racing a due instant); 1 s to ``--schedule`` - 1 s in, one
fault of the backend's (``--faults`` narrows them):

  kill        SIGKILL the app, start a new one at once (as a supervisor would)
  kill2       the same, then SIGKILL the new one 0.2-1.5 s after its spawn, and start another
  pg-restart  ``pg_ctl restart -m immediate`` of the soak's PostgreSQL
  flush       FLUSHDB of the Redis db (the Sentinel-monitored primary for sentinel-rq)
  failover    cut the replica off, then SIGKILL the primary: the Sentinels promote the replica,
              which lacks what was written since the cut

The trial then waits until every acknowledged occurrence due by the end of scheduling + 10 s has
fired (or ``--wait`` s more), stops the app (SIGTERM) and judges the log (bench/soak_verdict.py)
and the store: lost (an acknowledged occurrence never fired), cancelled fired (a fire of an
occurrence due after its job's ``cancel`` returned; with how many ms before due it returned),
early (``fired_at`` or the listener's clock before ``scheduled_for``; the store's fire history
with a negative lateness), duplicates (by what lies between the two fires: a kill, another
fault, or nothing), recovery (from the fault to the first fire after it, and to the last fire
more than 1 s late: the backlog cleared). Exit status 1 on any lost, cancelled-fired, early or
unexplained duplicate.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from soak_report import print_report  # bench/ is on sys.path when run as a script
from soak_services import PrivatePgBouncer, PrivatePostgres
from soak_verdict import Verdict, judge, pending, read_log

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.sentinel import SentinelCluster  # noqa: E402
from tests.support.services import RedisDbs  # noqa: E402

#: backend -> (store, substrate, redis, faults)
BACKENDS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "sqlite-sql": ("sqlite", "sql", "", ("kill", "kill2")),
    "postgres-sql": ("postgres", "sql", "", ("kill", "kill2", "pg-restart")),
    "postgres-rq": ("postgres", "rq", "redis", ("kill", "kill2", "pg-restart", "flush")),
    "pgbouncer-sql": ("pgbouncer", "sql", "", ("kill", "kill2", "pg-restart")),
    "pgbouncer-rq": ("pgbouncer", "rq", "redis", ("kill", "kill2", "pg-restart", "flush")),
    "sentinel-rq": ("postgres", "rq", "sentinel", ("kill", "kill2", "flush", "failover", "failover")),
}
Env = dict[str, str]
Apps = list[subprocess.Popen[str]]
#: Occurrences due up to this long after the end of scheduling must have fired (seconds).
SETTLE = 10.0


@dataclass
class Trial:
    backend: str
    fault: str
    verdict: Verdict
    #: jobs the store says are not cancelled although their cancel returned
    cancel_not_kept: int = 0
    #: the store's fire history: fires with a negative lateness
    store_early: int = 0
    errors: int = 0
    notes: list[str] = field(default_factory=list)


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.dir = Path(tempfile.mkdtemp(prefix="sdk-soak-"))
        names = set(args.backends)
        self.pg = PrivatePostgres(args.pg_port).start() if names - {"sqlite-sql"} else None
        pooled = {"pgbouncer-sql", "pgbouncer-rq"} & names
        self.bouncer = PrivatePgBouncer(self.pg, args.pgbouncer_port).start() if pooled and self.pg else None
        self.redis = RedisDbs() if {"postgres-rq", "pgbouncer-rq"} & names else None
        self.redis_url = self.redis.allocate() if self.redis else ""
        self.count = 0

    def close(self) -> None:
        if self.bouncer is not None:
            self.bouncer.close()
        if self.pg is not None:
            self.pg.close(keep=self.args.keep)
            if self.args.keep:
                print(f"PostgreSQL data kept in {self.pg.data}")
        if self.redis is not None:
            self.redis.close()

    # -- the log the soak writes beside the apps --------------------------------------------------

    def note(self, log: Path, line: str) -> None:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def spawn(self, env: dict[str, str], log: Path) -> subprocess.Popen[str]:
        self.note(log, f"R {time.time_ns() // 1000}")
        return subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "soak_app.py")], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, stderr=open(f"{log}.stderr", "a"), text=True,
        )  # fmt: skip

    # -- one trial --------------------------------------------------------------------------------

    def trial(self, backend: str) -> Trial:
        self.count += 1
        store, substrate, redis_kind, faults = BACKENDS[backend]
        fault = self.rng.choice([f for f in faults if f in self.args.faults] or list(faults))
        log = self.dir / f"{self.count:04d}-{backend}.log"
        database = f"soak_{self.count}"
        cluster = None
        if store == "sqlite":
            url = direct = f"sqlite:///{self.dir / f'{database}.db'}"
        else:
            assert self.pg is not None
            self.pg.create(database)
            direct = self.pg.url(database)
            url = (
                self.pg.url(database, self.bouncer.port) if store == "pgbouncer" and self.bouncer else direct
            )
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
        env.update(
            SCHEDULE_DATABASE_URL=url, SCHEDULE_SUBSTRATE=substrate, SOAK_LOG=str(log),
            SOAK_FOR=str(self.args.schedule), SOAK_RATE=str(self.args.rate),
            SOAK_SEED=str(self.rng.randrange(1 << 30)), PYTHONPATH=str(ROOT),
        )  # fmt: skip
        if store == "pgbouncer":
            env["SCHEDULE_DATABASE_POOLER"] = "transaction"
        if redis_kind == "redis":
            RedisDbs.flush(self.redis_url)
            env["SCHEDULE_REDIS_URL"] = self.redis_url
        elif redis_kind == "sentinel":
            folder = self.dir / f"sentinel-{self.count}"
            folder.mkdir()
            cluster = SentinelCluster(folder).start()
            env["SCHEDULE_REDIS_URL"] = cluster.url
        apps: list[subprocess.Popen[str]] = []
        try:
            horizon = self._run(env, log, fault, apps, cluster)
        finally:
            for app in apps:
                if app.poll() is None:
                    app.terminate()
                    try:
                        app.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        app.kill()
                        app.wait()
            if cluster is not None:
                cluster.close()
        result = Trial(backend, fault, judge(read_log(log), horizon))
        result.errors = read_log(log).errors
        self._check_store(direct, log, result)
        if store != "sqlite" and self.pg is not None and not self.args.keep:
            self.pg.drop(database)
        return result

    def _run(self, env: Env, log: Path, fault: str, apps: Apps, cluster: SentinelCluster | None) -> int:
        self.note(log, f"A {self.args.apps}")
        apps.append(self.spawn(env, log))
        self._ready(apps[-1], log)
        started = max(read_log(log).ready)
        until = started / 1e6 + self.args.schedule
        env["SOAK_UNTIL"] = f"{until:.6f}"
        for _ in range(self.args.apps - 1):
            apps.append(self.spawn(env, log))
            self._ready(apps[-1], log)
        time.sleep(self.rng.uniform(1.0, max(1.0, self.args.schedule - 1.0)))
        self._fault(fault, env, log, apps, cluster)
        horizon = until + SETTLE
        deadline = horizon + self.args.wait
        while time.time() < deadline and (time.time() < until or pending(read_log(log), int(horizon * 1e6))):
            time.sleep(0.2)
        self.note(log, f"H {int(horizon * 1e6)}")
        return int(horizon * 1e6)

    def _ready(self, app: subprocess.Popen[str], log: Path) -> None:
        assert app.stdout is not None
        if app.stdout.readline().strip() != "ready":
            app.wait()
            raise RuntimeError("the soak app did not start: " + Path(f"{log}.stderr").read_text()[-2000:])

    def _kill(self, env: Env, log: Path, apps: Apps) -> None:
        victim = self.rng.choice([app for app in apps if app.poll() is None])
        victim.send_signal(signal.SIGKILL)
        self.note(log, f"K {time.time_ns() // 1000} kill")
        victim.wait()
        apps.append(self.spawn(env, log))

    def _fault(self, fault: str, env: Env, log: Path, apps: Apps, cluster: SentinelCluster | None) -> None:
        now = lambda: time.time_ns() // 1000  # noqa: E731
        if fault in ("kill", "kill2"):
            self._kill(env, log, apps)
            if fault == "kill2":
                time.sleep(self.rng.uniform(0.2, 1.5))
                self._kill(env, log, apps)
            self._ready(apps[-1], log)
        elif fault == "pg-restart":
            assert self.pg is not None
            self.note(log, f"K {now()} pg-restart")
            self.pg.restart()
            self.note(log, f"Q {now()} pg-restart")
        elif fault == "flush":
            if cluster is not None:
                cluster.client(cluster.primary()).flushdb()
            else:
                redis.Redis.from_url(self.redis_url).flushdb()
            self.note(log, f"K {now()} flush")
        elif fault == "failover":
            assert cluster is not None
            cluster.cut_replication()
            time.sleep(self.rng.uniform(0.2, 0.8))
            self.note(log, f"K {now()} failover")
            cluster.kill_primary()
            cluster.wait_failover()
            self.note(log, f"Q {now()} failover")

    def _check_store(self, url: str, log: Path, result: Trial) -> None:
        """The store's side: no job whose cancel returned is still open (it is cancelled, or it
        had completed before); no fire in a job's history started before it was due."""
        from schedule_sdk import ScheduleContainer
        from schedule_sdk.domain.status import OPEN_STATUSES

        parsed = read_log(log)
        container = ScheduleContainer()
        container.config.from_dict({"database_url": url, "substrate": "sql", "auto_migrate": False})
        service = container.schedule_service()
        try:
            for job_id in parsed.cancel_returned:
                job = service.get_by_id(job_id)
                result.cancel_not_kept += job is None or job.status in OPEN_STATUSES
            for job_id in parsed.scheduled:
                result.store_early += sum(
                    r.fired_at < r.due_at
                    for r in service.history(job_id, limit=100)
                    if r.outcome != "skipped"
                )
        finally:
            container.shutdown_resources()


def rejudge(folder: Path, schedule: float) -> list[Trial]:
    """The trials of a finished run, judged again from their logs (the store is gone: its
    columns stay 0)."""
    trials = []
    for path in sorted(folder.glob("*.log")):
        log = read_log(path)
        if not log.ready:
            continue
        horizon = log.horizon or int(log.ready[0] + (schedule + SETTLE) * 1e6)
        kills = sum(fault == "kill" for _, fault in log.faults)
        fault = "kill2" if kills > 1 else (log.faults[0][1] if log.faults else "none")
        trials.append(Trial(path.stem.split("-", 1)[1], fault, judge(log, horizon), errors=log.errors))
    return trials


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, help="run trials round-robin for this long")
    parser.add_argument(
        "--trials", type=int, default=3, help="trials per backend, so N x backends in all (without --minutes)"
    )
    parser.add_argument("--backends", default=",".join(BACKENDS), type=lambda s: s.split(","))
    parser.add_argument(
        "--faults", default="kill,kill2,pg-restart,flush,failover", type=lambda s: s.split(",")
    )
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--schedule", type=float, default=6.0, help="seconds each trial schedules")
    parser.add_argument("--rate", type=float, default=20.0, help="jobs scheduled per second")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds past the horizon to wait")
    parser.add_argument("--pg-port", type=int, default=55432)
    parser.add_argument("--pgbouncer-port", type=int, default=56432)
    parser.add_argument("--apps", type=int, default=1, help="app processes side by side (a kill hits one)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the trials' databases (and the PostgreSQL cluster's folder)"
    )
    parser.add_argument("--judge", type=Path, help="judge the logs of a finished run again (no trials)")
    args = parser.parse_args()
    if args.judge:
        judged = rejudge(args.judge, args.schedule)
        print_report(judged, args.judge)
        return 1 if any(t.verdict.failed for t in judged) else 0
    unknown = set(args.backends) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backend(s) {sorted(unknown)}; one of {list(BACKENDS)}")
    print(f"soak: seed {args.seed}, backends {','.join(args.backends)}", flush=True)
    soak = Soak(args)
    trials: list[Trial] = []
    end = time.time() + args.minutes * 60 if args.minutes else None
    try:
        n = 0
        while (time.time() < end) if end else n < args.trials * len(args.backends):
            result = soak.trial(args.backends[n % len(args.backends)])
            n += 1
            trials.append(result)
            v = result.verdict
            print(
                f"trial {n:4d} {result.backend:14s} {result.fault:10s} ack {v.acknowledged:4d} "
                f"lost {len(v.lost)} cancelled-fired {len(v.cancelled_fired)} early {len(v.early)} "
                f"dup {sum(v.duplicates.values())} first {v.first_fire_s or 0:.2f}s "
                f"cleared {v.cleared_s or 0:.2f}s store-early {result.store_early} "
                f"cancel-not-kept {result.cancel_not_kept} load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    except KeyboardInterrupt:  # a long soak stopped early: the report covers the trials that ended
        print(f"soak: interrupted; the report covers the {len(trials)} trials that ended", flush=True)
    finally:
        soak.close()
    print_report(trials, soak.dir)
    return 1 if any(t.verdict.failed or t.store_early or t.cancel_not_kept for t in trials) else 0


if __name__ == "__main__":
    sys.exit(main())
