"""The producer and worker processes of bench/independent.py (one system each).

Run by the harness, never by hand:

    python bench/independent_side.py produce SYSTEM --config JSON --dues FILE --keys FILE
    python bench/independent_side.py work SYSTEM --config JSON

``PYTHONPATH`` chooses which tree's ``schedule_sdk`` is imported (the harness's compare mode points
it at a worktree of another commit), so this file uses only what every version of the package has:
``ScheduleContainer``, ``config.from_dict``, ``schedule_service().schedule_at(OneShotSpec(...))``,
``container.worker()`` and ``@on_event``.

The listener (``record``) appends ``key time.time() pid`` to ``$INDEP_EVENTS`` with one
``write(2)`` (O_APPEND). A worker runs until its standard input is closed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_fd = -1


def _write(key: str) -> None:
    global _fd
    if _fd < 0:
        _fd = os.open(os.environ["INDEP_EVENTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_fd, f"{key} {time.time()} {os.getpid()}\n".encode())


def aps_fire(key: str) -> None:
    """APScheduler's job function (referenced as ``independent_side:aps_fire``)."""
    _write(key)


def _dues(path: str) -> list[datetime]:
    return [datetime.fromtimestamp(float(line), UTC) for line in Path(path).read_text().split()]


# --- schedule_sdk ---------------------------------------------------------------------------------


def _sdk_container(config: dict[str, Any]) -> Any:
    from schedule_sdk import ScheduleContainer

    container = ScheduleContainer()
    container.config.from_dict(config)
    return container


def sdk_produce(config: dict[str, Any], dues: list[datetime]) -> list[str]:
    from schedule_sdk import OneShotSpec

    container = _sdk_container(config)
    service = container.schedule_service()
    keys = [service.schedule_at(OneShotSpec(topic="bench", run_at=due, timezone="UTC")).id for due in dues]
    container.shutdown_resources()
    return keys


def _trace(path: str) -> None:
    """``INDEP_TRACE=FILE``: append the worker's own timings to FILE (one line per event,
    ``kind wall_start wall_end detail``): each claim (its job ids), each outcome batch recorded,
    each poller cycle, each measurement of the offset from the store's clock (offset, error); on
    the rq substrate also each release by the pump (the entries it released), each pop of
    released batches and each hold for a due instant. For finding where a late fire waited; off
    by default. ``INDEP_SWITCH=SECONDS`` sets the worker's ``sys.setswitchinterval``."""
    import threading

    from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
    from schedule_sdk.core.firing import Firing
    from schedule_sdk.core.store_time import StoreTime

    lock = threading.Lock()
    out = open(path, "a", buffering=1)  # lives as long as the worker

    def line(kind: str, start: float, end: float, detail: str) -> None:
        with lock:
            out.write(f"{kind} {start:.6f} {end:.6f} {detail}\n")

    claim_due, record = SQLAlchemyJobStore.claim_due, Firing.record

    def traced_claim(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.time()
        rows = claim_due(self, *args, **kwargs)
        due = ",".join(f"{r.id}@{r.run_at.timestamp():.6f}" for r in rows)
        line("claim", start, time.time(), due or "-")
        return rows

    def traced_record(self: Any, results: Any) -> None:
        start = time.time()
        record(self, results)
        line("record", start, time.time(), str(len(results)))

    def traced_publish(self: Any, job: Any, fired_at: Any) -> Any:
        start = time.time()
        result = publish(self, job, fired_at)
        line("fire", start, time.time(), job.id)
        return result

    publish = Firing._publish
    Firing._publish = traced_publish  # type: ignore[method-assign]

    def traced_claim_many(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.time()
        rows = claim_many(self, *args, **kwargs)
        due = ",".join(f"{r.id}@{r.run_at.timestamp():.6f}" for r in rows)
        line("claim", start, time.time(), due or "-")
        return rows

    def traced_measure(self: Any) -> Any:
        start = time.time()
        reading = measure(self)
        line("clock", start, time.time(), f"{reading.offset:.6f} {reading.error:.6f}")
        return reading

    measure = StoreTime.measure
    StoreTime.measure = traced_measure  # type: ignore[method-assign]
    claim_many = SQLAlchemyJobStore.claim_many
    SQLAlchemyJobStore.claim_many = traced_claim_many  # type: ignore[method-assign]
    SQLAlchemyJobStore.claim_due = traced_claim  # type: ignore[method-assign]
    Firing.record = traced_record  # type: ignore[method-assign]
    try:  # the rq substrate's consumer: each pop of released batches, each hold for a due instant
        from schedule_sdk.substrates.rq import consumer
        from schedule_sdk.substrates.rq.queue import RQExecutionQueue
    except ImportError:
        return
    pop, hold = RQExecutionQueue.pop_released, consumer.hold_until

    def traced_pop(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.time()
        taken = pop(self, *args, **kwargs)
        due = ",".join(f"{batch.due_ms}" for batch in taken)
        line("pop", start, time.time(), due or "-")
        return taken

    def traced_hold(due_ms: Any, *args: Any, **kwargs: Any) -> None:
        start = time.time()
        hold(due_ms, *args, **kwargs)
        line("hold", start, time.time(), str(due_ms))

    def traced_release(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.time()
        released, earliest = release(self, *args, **kwargs)
        line("release", start, time.time(), ",".join(released) or "-")
        return released, earliest

    release = RQExecutionQueue.release
    RQExecutionQueue.release = traced_release  # type: ignore[method-assign]
    RQExecutionQueue.pop_released = traced_pop  # type: ignore[method-assign]
    consumer.hold_until = traced_hold  # type: ignore[assignment]


def sdk_work(config: dict[str, Any]) -> None:
    from schedule_sdk import SCHEDULE_ARRIVED_EVENT, on_event

    if os.environ.get("INDEP_TRACE"):
        _trace(os.environ["INDEP_TRACE"])
    if os.environ.get("INDEP_SWITCH"):
        sys.setswitchinterval(float(os.environ["INDEP_SWITCH"]))

    @on_event(SCHEDULE_ARRIVED_EVENT)
    def record(event: Any) -> None:
        _write(event.scheduled_job_id)

    container = _sdk_container(config)
    container.listeners().register(record)  # a marked function; registering twice is harmless
    with container.worker():
        print("ready", flush=True)
        sys.stdin.read()
    container.shutdown_resources()


# --- APScheduler 3 ----------------------------------------------------------------------------------


def _aps(config: dict[str, Any]) -> Any:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    return BackgroundScheduler(jobstores={"default": SQLAlchemyJobStore(url=config["url"])}, timezone=UTC)


def aps_produce(config: dict[str, Any], dues: list[datetime]) -> list[str]:
    scheduler = _aps(config)
    scheduler.start(paused=True)  # started: add_job writes to the store at once
    keys = [str(index) for index in range(len(dues))]
    for key, due in zip(keys, dues, strict=True):
        scheduler.add_job("independent_side:aps_fire", "date", run_date=due, args=[key], id=key)
    scheduler.shutdown(wait=False)
    return keys


def aps_work(config: dict[str, Any]) -> None:
    scheduler = _aps(config)
    scheduler.start()
    print("ready", flush=True)
    sys.stdin.read()
    scheduler.shutdown(wait=False)


# --- Celery ---------------------------------------------------------------------------------------


def celery_produce(config: dict[str, Any], dues: list[datetime]) -> list[str]:
    from celery_app import app, fire

    app.conf.broker_url = config["broker"]
    keys = [str(index) for index in range(len(dues))]
    for key, due in zip(keys, dues, strict=True):
        fire.apply_async(args=(int(key), due.timestamp()), eta=due)
    return keys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["produce", "work"])
    parser.add_argument("system", choices=["sdk", "aps", "celery"])
    parser.add_argument("--config", required=True)
    parser.add_argument("--dues")
    parser.add_argument("--keys")
    args = parser.parse_args()
    config = json.loads(args.config)
    if args.role == "produce":
        produce = {"sdk": sdk_produce, "aps": aps_produce, "celery": celery_produce}[args.system]
        keys = produce(config, _dues(args.dues))
        Path(args.keys).write_text("\n".join(keys) + "\n")
    else:
        {"sdk": sdk_work, "aps": aps_work}[args.system](config)


if __name__ == "__main__":
    main()
