"""The app of bench/soak.py: one process that runs a worker (``container.worker()``, default
settings from ``SCHEDULE_*``) and, until ``$SOAK_UNTIL`` (epoch seconds; else ``$SOAK_FOR``
seconds after its worker started), schedules one-shots, intervals and crons and cancels about
one in ten of them: two thirds at once, one third racing a due instant (the cancel is sent so
that it returns 0-10 ms before that instant).

It appends to ``$SOAK_LOG`` the lines bench/soak_verdict.py reads, one fsynced ``write`` each.
``$SOAK_RATE`` jobs a second (default 20); ``$SOAK_SEED`` seeds its choices. The soak kills it
with SIGKILL; SIGTERM stops it cleanly.
"""

from __future__ import annotations

import heapq
import os
import random
import signal
import sys
import threading
import time

_fd = os.open(os.environ["SOAK_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def log(line: str) -> None:
    os.write(_fd, (line + "\n").encode())
    os.fsync(_fd)


def now_us() -> int:
    return time.time_ns() // 1000


from datetime import UTC, datetime, timedelta  # noqa: E402

from schedule_sdk import (  # noqa: E402
    SCHEDULE_ARRIVED_EVENT,
    CronRepeat,
    IntervalRepeat,
    MisfirePolicy,
    OneShotSpec,
    RepeatSpec,
    ScheduleArrivedEvent,
    ScheduleContainer,
    ScheduledJob,
    ScheduleService,
)
from schedule_sdk.entrypoints.stopping import StopSignals  # noqa: E402

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ALL = MisfirePolicy(mode="fire_all")
TOPIC = "soak"


def us(instant: datetime) -> int:
    return (instant - EPOCH) // timedelta(microseconds=1)


def fired(event: ScheduleArrivedEvent) -> None:
    seen = now_us()
    log(
        f"F {event.scheduled_job_id} {event.occurrence} {us(event.scheduled_for)} {us(event.fired_at)}"
        f" {seen} {os.getpid()}"
    )


def dues(job: ScheduledJob) -> list[int]:
    """The job's due instants: its first and, for a repeat, the ones after it up to its limit."""
    instants = [job.scheduled_for]
    while job.repeat is not None and len(instants) < (job.limit or 1):
        instants.append(job.next_occurrence_after(instants[-1]))
    return [us(i) for i in instants]


def schedule_one(service: ScheduleService, rng: random.Random) -> tuple[str, ScheduledJob]:
    first = datetime.now(UTC) + timedelta(seconds=rng.uniform(0.3, 2.5))
    pick = rng.random()
    if pick < 0.7:
        return "one", service.schedule_at(OneShotSpec(topic=TOPIC, run_at=first, timezone="UTC"))
    if pick < 0.9:
        repeat: IntervalRepeat | CronRepeat = IntervalRepeat(every_ms=rng.randint(400, 1200))
        kind, limit = "interval", rng.randint(3, 6)
    else:
        repeat, kind, limit = CronRepeat(expression="* * * * *"), "cron", 2
    spec = RepeatSpec(topic=TOPIC, timezone="UTC", repeat=repeat, limit=limit, misfire=ALL)
    return kind, service.schedule_repeat(spec)


class Racer(threading.Thread):
    """Cancels jobs so that each cancel returns a chosen 0-10 ms before a due instant."""

    def __init__(self, service: ScheduleService, stop: threading.Event) -> None:
        super().__init__(daemon=True, name="soak-racer")
        self.service, self.stop = service, stop
        self.heap: list[tuple[float, str]] = []
        self.lock = threading.Condition()
        self.latency = 0.003  # the running estimate of a cancel's duration (s)

    def add(self, job_id: str, due_us: int, before_s: float) -> None:
        with self.lock:
            heapq.heappush(self.heap, (due_us / 1e6 - before_s, job_id))
            self.lock.notify()

    def run(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                if not self.heap:
                    self.lock.wait(0.1)
                    continue
                target, job_id = self.heap[0]
                wait = target - self.latency - time.time()
                if wait > 0.002:
                    self.lock.wait(min(wait - 0.001, 0.1))
                    continue
                heapq.heappop(self.heap)
            while time.time() < target - self.latency:
                pass
            start = time.perf_counter()
            cancel(self.service, job_id)
            self.latency = 0.8 * self.latency + 0.2 * (time.perf_counter() - start)


def cancel(service: ScheduleService, job_id: str) -> None:
    log(f"X {job_id} {now_us()}")
    try:
        service.cancel(job_id)
    except Exception as exc:  # an outage: the cancel's outcome is unknown (X without C)
        log(f"E {now_us()} cancel:{type(exc).__name__}")
        return
    log(f"C {job_id} {now_us()}")


def schedule_loop(service: ScheduleService, until: float, stop: StopSignals, racer: Racer) -> None:
    rng = random.Random(int(os.environ.get("SOAK_SEED", "0")) ^ os.getpid())
    pause = 1.0 / float(os.environ.get("SOAK_RATE", "20"))
    while time.time() < until and not stop.wait(pause):
        try:
            kind, job = schedule_one(service, rng)
        except Exception as exc:  # an outage: not acknowledged, so not expected to fire
            log(f"E {now_us()} schedule:{type(exc).__name__}")
            stop.wait(0.1)
            continue
        instants = dues(job)
        log(f"S {job.id} {kind} {','.join(map(str, instants))}")
        if rng.random() >= 0.1:
            continue
        if kind != "cron" and rng.random() < 1 / 3:
            racer.add(job.id, rng.choice(instants), rng.uniform(0.0, 0.010))
        else:
            cancel(service, job.id)


def main() -> int:
    log(f"I {now_us()} {os.getpid()}")
    container = ScheduleContainer()
    container.listeners().connect(SCHEDULE_ARRIVED_EVENT, fired)
    service = container.schedule_service()
    with StopSignals((signal.SIGTERM,)) as stop, container.worker():
        log(f"B {now_us()} {os.getpid()}")
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        until = float(os.environ.get("SOAK_UNTIL") or time.time() + float(os.environ.get("SOAK_FOR", "6")))
        racing = threading.Event()
        racer = Racer(service, racing)
        racer.start()
        schedule_loop(service, until, stop, racer)
        stop.wait()
        racing.set()
    container.shutdown_resources()
    return 0


if __name__ == "__main__":
    sys.exit(main())
