"""What the ``rq`` substrate's entries and released jobs carry, without Redis: the occurrence key
format, the fire function's dotted path, and the due instant a released job is held until."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: The only callable the SDK ever enqueues (by dotted path; arguments are plain strings).
FIRE_FUNCTION = "schedule_sdk.entrypoints.rq_job.fire"
#: The RQ job meta field holding the due instant (epoch ms) of a released job's entries: a job
#: released ahead of it is held until then (:func:`hold_until_due`).
DUE_META = "due_ms"
#: The longest a released job is held for its due instant (seconds): a larger meta value is not
#: the pump's (its lead is milliseconds), and the claim refuses what is not due anyway.
MAX_HOLD = 1.0


def due_of(meta: Any) -> float | None:
    """The due instant (epoch ms) in a released RQ job's ``meta`` (``DUE_META``); None when
    absent or malformed."""
    due_ms = meta.get(DUE_META) if isinstance(meta, dict) else None
    if isinstance(due_ms, bool) or not isinstance(due_ms, int | float):
        return None
    return float(due_ms)


def hold_until(
    due_ms: float | None,
    stop: Callable[[], bool] = lambda: False,
    now: Callable[[], float] | None = None,
) -> None:
    """Sleep until ``due_ms`` (epoch ms) on the clock ``now`` (epoch seconds: the claimer's
    view of the store's clock; default this process's clock), at most ``MAX_HOLD`` seconds; at
    once when None or past, or when ``stop()`` says so."""
    if due_ms is None:
        return
    clock = now or time.time
    # ``now`` is read once; the rest (at most MAX_HOLD) is waited out on this process's clock.
    left = min(due_ms / 1000.0 + 1e-6 - clock(), MAX_HOLD)  # + 1e-6: past the instant despite float rounding
    deadline = time.time() + left
    while (left := deadline - time.time()) > 0 and not stop():
        time.sleep(min(left, 0.05))


def hold_until_due(
    meta: Any, stop: Callable[[], bool] = lambda: False, now: Callable[[], float] | None = None
) -> None:
    """:func:`hold_until` the due instant in a released RQ job's ``meta`` (:func:`due_of`)."""
    hold_until(due_of(meta), stop, now)


def parse_key(key: Any) -> tuple[str, int, int] | None:
    """``<job id>_<occurrence>_<attempt>`` -> its parts, or None for anything else."""
    if isinstance(key, bytes):
        key = key.decode()
    if not isinstance(key, str) or len(key) > 100:
        return None
    parts = key.rsplit("_", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    job_id = parts[0]
    if not job_id or not all(c.isalnum() or c == "-" for c in job_id):
        return None
    return job_id, int(parts[1]), int(parts[2])
