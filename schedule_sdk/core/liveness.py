"""``Liveness``: this worker's row in the worker registry, and who among the others is dead.

Every worker beats its row (``WorkerRegistry.beat``) from its heartbeat thread. A registered worker is
dead when its last beat is more than ``dead_after`` seconds old, or at once when it ran on this
node (same kernel boot and PID namespace) and its process no longer exists (a restart after
``kill -9`` recovers without waiting). A dead worker's claims are released by
:meth:`~schedule_sdk.core.reconciler.Reconciler.release_dead`; its row is deleted after
:data:`FORGET_AFTER` seconds more, so ``schedule-sdk workers`` shows it as dead meanwhile.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from pathlib import Path

from schedule_sdk.ports import WorkerInfo

#: Seconds after its last beat when a dead worker's registry row is deleted.
FORGET_AFTER = 3600.0
#: For :data:`DEAD_RESCUE_WINDOW` seconds after a worker is declared dead, the heartbeat hands
#: over entries released more than this many seconds ago and taken out of the RQ queue but never
#: claimed (the dead consumer had popped them), instead of waiting for the lease. A live
#: consumer claims what it pops within milliseconds, or renews the marks of what it holds at
#: least every second while it waits for room (``RQExecutionQueue.touch``).
DEAD_RESCUE_AGE = 1.5
DEAD_RESCUE_WINDOW = 5.0


def node_id() -> str | None:
    """This kernel boot and PID namespace (Linux), or None where unknown: two processes with the
    same node id see each other's pids."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}/{namespace}"[:128]


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def beat_too_old(worker: WorkerInfo, now: datetime, dead_after: timedelta) -> bool:
    return worker.last_beat < now - dead_after


def process_gone(worker: WorkerInfo, node: str | None) -> bool:
    """``worker`` ran on ``node`` (this process's node) and its process no longer exists."""
    return node is not None and worker.node == node and not process_exists(worker.pid)


def is_dead(worker: WorkerInfo, now: datetime, dead_after: float) -> bool:
    """What a live worker on this node would conclude about ``worker`` now."""
    return beat_too_old(worker, now, timedelta(seconds=dead_after)) or process_gone(worker, node_id())


class Liveness:
    """This worker's registry row and the verdict on the others."""

    def __init__(self, *, worker_id: str, substrate: str, dead_after: float, started_at: datetime) -> None:
        self.dead_after = timedelta(seconds=dead_after)
        self.me = WorkerInfo(
            id=worker_id,
            host=socket.gethostname()[:255],
            pid=os.getpid(),
            substrate=substrate,
            started_at=started_at,
            last_beat=started_at,
            node=node_id(),
        )
        self._released: dict[str, datetime] = {}  # dead worker -> the last beat we released it at

    def row(
        self, now: datetime, in_flight: int, stuck: int = 0, clock: tuple[float, float] | None = None
    ) -> WorkerInfo:
        """This worker's row as of a beat at ``now`` (``stuck``: listener threads still running
        a fire that timed out), with its ``(offset, error)`` from the store's clock when measured."""
        return WorkerInfo(
            id=self.me.id,
            host=self.me.host,
            pid=self.me.pid,
            substrate=self.me.substrate,
            started_at=self.me.started_at,
            last_beat=now,
            in_flight=in_flight,
            node=self.me.node,
            stuck=stuck,
            clock_offset=None if clock is None else clock[0],
            clock_error=None if clock is None else clock[1],
        )

    def judge(self, workers: list[WorkerInfo], now: datetime) -> tuple[list[WorkerInfo], list[str]]:
        """The dead workers whose claims were not released since their last beat (a worker that
        beats again is judged afresh), and the ids among them found dead by their missing process
        rather than by their beat's age. Call :meth:`released` once their claims are released."""
        others = [x for x in workers if x.id != self.me.id]
        stale = [x for x in others if beat_too_old(x, now, self.dead_after)]
        gone = [x for x in others if x not in stale and process_gone(x, self.me.node)]
        beats = {x.id: x.last_beat for x in stale + gone}
        self._released = {k: v for k, v in self._released.items() if beats.get(k) == v}
        fresh = [x for x in stale + gone if self._released.get(x.id) != x.last_beat]
        return fresh, [x.id for x in gone if x in fresh]

    def released(self, workers: list[WorkerInfo]) -> None:
        self._released.update({x.id: x.last_beat for x in workers})
