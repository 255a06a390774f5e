"""Benchmark of the timer service through NATS JetStream. Prints figures.

Run:  .venv/bin/python bench/timer_jetstream.py [--timers 10000] [--tenants 100] [--rate 200]
                                                [--db sqlite|postgres] [--lead 10]

It starts the real ``timer-service`` process (``python -m schedule_sdk.timer``) on a fresh database
and its own JetStream streams (``BENCH_<pid>_*``, deleted afterwards), then:

1. publishes ``--timers`` ScheduleTimer commands for ``--tenants`` tenants, due ``--lead`` seconds
   from now onwards at ``--rate`` timers per second, and measures **ingest**: commands persisted
   and acked per second (first publish -> the durable consumer has nothing pending or unacked);
2. collects every DueTimeReached with a JetStream consumer in this process and measures
   **lateness** = receive time - dueAt (p50 / p99 / max), **lost** (timers never reached) and
   **duplicates**.

Targets: ingest >= 2,000 commands/s on SQLite; lateness p99 <= 50 ms at 200 timers/s; 0 lost.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import psycopg
from _stats import PG_ADMIN, percentile  # bench/ is on sys.path when run as a script

from schedule_sdk.timer import Envelope, ScheduleTimer

ROOT = Path(__file__).resolve().parents[1]
NATS_URL = "nats://127.0.0.1:4222"


class Bench:
    def __init__(self, args: argparse.Namespace, db: str) -> None:
        self.args = args
        tag = f"BENCH_{os.getpid()}"
        subject = tag.lower()
        self.names = {
            "TIMER_COMMAND_STREAM": f"{tag}_CMD",
            "TIMER_COMMAND_SUBJECT": f"{subject}.commands",
            "TIMER_EVENT_STREAM": f"{tag}_EVT",
            "TIMER_EVENT_SUBJECT": f"{subject}.events",
            "TIMER_CONSUMER": "bench-timer",
        }
        self.db = db
        self.received: list[tuple[float, Envelope]] = []
        self.distinct: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    def start_service(self, log: Path) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONPATH=str(ROOT), TIMER_DB_PATH=self.db, TIMER_BROKER_URL=NATS_URL)
        env.update(self.names)
        env.setdefault("TIMER_LOG_LEVEL", "WARNING")
        out = log.open("ab")
        proc = subprocess.Popen([sys.executable, "-m", "schedule_sdk.timer"], env=env, stdout=out, stderr=out)
        return proc

    async def run(self) -> dict[str, Any]:
        a = self.args
        nc = await nats.connect(NATS_URL)
        js = nc.jetstream()
        n = self.names
        for stream, subject in (
            (n["TIMER_COMMAND_STREAM"], n["TIMER_COMMAND_SUBJECT"]),
            (n["TIMER_EVENT_STREAM"], n["TIMER_EVENT_SUBJECT"]),
        ):
            await js.add_stream(name=stream, subjects=[subject])

        async def on_event(msg: Any) -> None:
            now = time.time()
            envelope = Envelope.from_json(msg.data)
            with self.lock:
                self.received.append((now, envelope))
                self.distinct.add((envelope.tenant_id, envelope.payload.service_call_id))

        await js.subscribe(n["TIMER_EVENT_SUBJECT"], stream=n["TIMER_EVENT_STREAM"], cb=on_event)
        start = datetime.now(UTC) + timedelta(seconds=a.lead)
        step = timedelta(seconds=1 / a.rate)
        commands = [
            ScheduleTimer(tenant_id=f"tenant-{i % a.tenants:03d}", service_call_id=f"sc-{i:06d}", due_at=at)
            for i, at in enumerate(start + n * step for n in range(a.timers))
        ]
        due = {(c.tenant_id, c.service_call_id): c.due_at.timestamp() for c in commands}
        gc.freeze()  # no full collections over the commands while measuring receive times
        log = Path(tempfile.gettempdir()) / f"timer-bench-{os.getpid()}.log"
        proc = self.start_service(log)
        try:
            await self._wait_consumer(js)
            ingest = await self._ingest(js, commands)
            await self._all_reached(max(due.values()) + 10)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            for stream in (n["TIMER_COMMAND_STREAM"], n["TIMER_EVENT_STREAM"]):
                await js.delete_stream(stream)
            await nc.close()
        return self._report(ingest, due, log)

    async def _wait_consumer(self, js: Any) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                await js.consumer_info(self.names["TIMER_COMMAND_STREAM"], self.names["TIMER_CONSUMER"])
                return
            except nats.js.errors.NotFoundError:
                await asyncio.sleep(0.1)
        raise RuntimeError("the timer service did not start its consumer")

    async def _ingest(self, js: Any, commands: list[ScheduleTimer]) -> dict[str, float]:
        subject = self.names["TIMER_COMMAND_SUBJECT"]
        t0 = time.perf_counter()
        acks = [await js.publish_async(subject, c.to_json()) for c in commands]
        await asyncio.gather(*acks)
        published = time.perf_counter() - t0
        while True:
            info = await js.consumer_info(self.names["TIMER_COMMAND_STREAM"], self.names["TIMER_CONSUMER"])
            done = info.num_pending == 0 and info.num_ack_pending == 0
            if done and info.delivered.stream_seq >= len(commands):
                break
            await asyncio.sleep(0.01)
        persisted = time.perf_counter() - t0
        return {"published_s": published, "persisted_s": persisted, "rate": len(commands) / persisted}

    async def _all_reached(self, deadline: float) -> None:
        """Until every timer was received once, or ``deadline`` (Unix time) passed."""
        while time.time() < deadline:
            with self.lock:
                if len(self.distinct) >= self.args.timers:
                    return
            await asyncio.sleep(0.2)

    def _report(
        self, ingest: dict[str, float], due: dict[tuple[str, str], float], log: Path
    ) -> dict[str, Any]:
        with self.lock:
            received = list(self.received)
        keys = Counter((e.tenant_id, e.payload.service_call_id) for _, e in received)
        first: dict[tuple[str, str], float] = {}
        for at, e in received:
            key = (e.tenant_id, e.payload.service_call_id)
            first.setdefault(key, at)
        lateness = [(at - due[key]) * 1000 for key, at in first.items()]
        if self.args.windows:  # lateness p99 per 5 s of due times: where do the slow fires sit?
            start = min(due.values())
            windows: dict[int, list[float]] = {}
            for key, at in first.items():
                windows.setdefault(int((due[key] - start) // 5), []).append((at - due[key]) * 1000)
            for w, values in sorted(windows.items()):
                p50, p99 = percentile(values, 50), percentile(values, 99)
                print(f"    due +{w * 5:3d}s  p50 {p50:6.1f}  p99 {p99:6.1f} ms")
        early = sum(1 for v in lateness if v < 0)
        return {
            "ingest_rate": ingest["rate"],
            "ingest_s": ingest["persisted_s"],
            "publish_s": ingest["published_s"],
            "p50": percentile(lateness, 50) if lateness else float("nan"),
            "p99": percentile(lateness, 99) if lateness else float("nan"),
            "max": max(lateness) if lateness else float("nan"),
            "early": early,
            "lost": len(set(due) - set(keys)),
            "duplicates": sum(c - 1 for c in keys.values()),
            "log": str(log),
        }


def _database(kind: str, tmp: str) -> tuple[str, Any]:
    if kind == "sqlite":
        return str(Path(tmp) / "event_service.db"), None
    name = f"timer_bench_{os.getpid()}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}", drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--rate", type=float, default=200.0, help="timers falling due per second")
    parser.add_argument("--lead", type=float, default=10.0, help="seconds until the first timer is due")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--windows", action="store_true", help="also print lateness per 5 s window")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db, drop = _database(args.db, tmp)
        try:
            r = asyncio.run(Bench(args, db).run())
        finally:
            if drop is not None:
                drop()
    print(f"timer bench: {args.timers} timers, {args.tenants} tenants, {args.rate:g}/s due, store {args.db}")
    print(
        f"  ingest    {r['ingest_rate']:8.0f} commands/s"
        f"  ({r['ingest_s']:.2f} s to persist+ack; publish {r['publish_s']:.2f} s)"
    )
    print(
        f"  lateness  p50 {r['p50']:6.1f} ms   p99 {r['p99']:6.1f} ms"
        f"   max {r['max']:6.1f} ms   early {r['early']}"
    )
    print(f"  lost      {r['lost']}   duplicates {r['duplicates']}   (service log: {r['log']})")


if __name__ == "__main__":
    main()
