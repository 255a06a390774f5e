"""A test-only hook that SIGKILLs this process at one named point of the ``rq`` substrate's hand-offs.

``install(point, container)`` wraps the container's own objects (no library code knows about it):

- ``claim``: after the RQ consumer took a released fire out of Redis, before it claims the row;
- ``schedule``: after ``schedule_at`` committed its row, before the queue's ``committed``;
- ``record``: after ``Firing.record`` committed an outcome (a next occurrence or a retry), before
  ``committed``;
- ``release``: after the reconciler committed the release of a dead worker's claims (its lease
  expired: ``release_expired``; or the registry shows it dead: ``release_dead``; both hand the
  rows back through ``_hand_back``) and staged their entries, before ``committed``.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from schedule_sdk import ScheduleContainer

#: The function under whose call ``ExecutionQueue.committed`` runs at each point (the frame that is killed).
CALLERS = {"schedule": "_write", "record": "record", "release": "_hand_back"}
POINTS = ("claim", *CALLERS)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _callers(frame: Any, depth: int = 5) -> list[str]:
    """The names of the functions of ``frame`` and the ones below it (``committed`` is reached
    through the write-order helpers, so the point's function is a few frames down)."""
    names: list[str] = []
    while frame is not None and len(names) < depth:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return names


def install(point: str, container: ScheduleContainer) -> None:
    if point not in POINTS:
        raise ValueError(f"unknown crash point {point!r}; one of {POINTS}")
    if point == "claim":
        from schedule_sdk.substrates.rq.fire import DispatchRuntime

        def claim(self: Any, members: list[str], **how: Any) -> Any:
            die()

        DispatchRuntime.claim = claim  # type: ignore[method-assign]
        return
    queue = container.queue()
    committed: Callable[..., None] = queue.committed

    def crashing(occurrences: Any) -> None:
        if occurrences and CALLERS[point] in _callers(sys._getframe(1)):
            die()
        committed(occurrences)

    queue.committed = crashing  # type: ignore[method-assign]
