"""The RQ job function, :func:`fire`: the only callable the ``rq`` substrate ever enqueues.

A stock ``rq worker --serializer rq.serializers.JSONSerializer`` process runs it; it builds the
process's container once from the ``SCHEDULE_*`` environment (listener modules from
``SCHEDULE_LISTENER_MODULES``) and fires the released occurrences through that container's
``rq_job_runtime`` (:class:`~schedule_sdk.substrates.rq.fire.SyncRuntime`). Inside a
``schedule-sdk`` worker the consumer thread fires released entries itself and never calls this.
"""

from __future__ import annotations

import threading

from rq import get_current_job

from schedule_sdk.bootstrap.container import ScheduleContainer
from schedule_sdk.substrates.rq.entries import hold_until_due
from schedule_sdk.substrates.rq.fire import SyncRuntime

_default: SyncRuntime | None = None
_default_lock = threading.Lock()


def fire(queue_name: str, members: list[str]) -> None:
    """Fire the released occurrences ``members`` of RQ queue ``queue_name``."""
    runtime = default_runtime()
    if runtime.queue.queue_name != queue_name:
        raise ValueError(f"this worker serves queue {runtime.queue.queue_name!r}, not {queue_name!r}")
    job = get_current_job()
    hold_until_due(None if job is None else job.meta, now=runtime.store_seconds)  # released ahead
    runtime.fire([str(m) for m in members])


def default_runtime() -> SyncRuntime:
    """This process's runtime, built once from the ``SCHEDULE_*`` environment."""
    global _default
    with _default_lock:
        if _default is None:
            runtime: SyncRuntime = ScheduleContainer().rq_job_runtime()
            _default = runtime
        return _default
