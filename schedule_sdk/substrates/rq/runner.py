"""``RQRunner``: what a ``schedule-sdk`` worker runs on the ``rq`` substrate: the due-time pump
(active in one process at a time) and an in-process RQ worker thread whose fires go to the
worker's ``FireDispatcher``.

This is where the rq runtimes meet the Redis adapter: the fire runtimes see the delay index
only through the :class:`~schedule_sdk.ports.DelayIndex` port; the pump's leader lock and wake-up
channel and the consumer's pops use the adapter's Redis connection and RQ queue."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from redis.exceptions import RedisError

from schedule_sdk.bootstrap.settings import Settings
from schedule_sdk.core.dispatch import FireDispatcher
from schedule_sdk.core.firing import Firing
from schedule_sdk.core.write_order import hand_over_committed
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import Clock, ExecutionQueue, JobStore, Occurrence
from schedule_sdk.substrates.rq.consumer import WorkerThread
from schedule_sdk.substrates.rq.fire import DispatchRuntime
from schedule_sdk.substrates.rq.pump import DuePump
from schedule_sdk.substrates.rq.queue import RQExecutionQueue

logger = logging.getLogger(__name__)


class RQRunner:
    def __init__(
        self,
        *,
        queue: RQExecutionQueue,
        store: JobStore,
        dispatcher: FireDispatcher,
        clock: Clock,
        lease_seconds: float = 30.0,
        pump: DuePump | None = None,
    ) -> None:
        self.queue = queue
        self.dispatcher = dispatcher
        self.pump = pump or DuePump(queue, owner=dispatcher.worker_id)
        self.runtime = DispatchRuntime(
            dispatcher=dispatcher, store=store, queue=queue, clock=clock, lease_seconds=lease_seconds
        )
        self.worker = WorkerThread(
            queue=queue.rq_queue, runtime=self.runtime, released_key=queue.keys.released
        )

    @classmethod
    def from_settings(
        cls,
        *,
        settings: Settings,
        queue: ExecutionQueue,
        firing: Firing,
        store: JobStore,
        dispatcher: FireDispatcher,
        clock: Clock,
    ) -> RQRunner:
        if not isinstance(queue, RQExecutionQueue):
            raise TypeError("RQRunner needs the RQExecutionQueue")
        return cls(
            queue=queue, store=store, dispatcher=dispatcher, clock=clock, lease_seconds=settings.lease_seconds
        )

    def start(self) -> None:
        self.runtime.start()
        self.dispatcher.on_release = self._rehand
        self.pump.start()
        self.worker.start()

    def stop(self) -> None:
        self.runtime.stopping.set()
        self.worker.stop()
        self.runtime.stop()
        self.pump.stop()

    def peers_dead(self, worker_ids: Sequence[str]) -> None:
        """Workers declared dead: if one of them held the pump lock, take it over now."""
        try:
            self.pump.drop_lock_of(worker_ids)
        except RedisError as error:  # the lock expires by itself
            logger.warning("could not check the pump lock of dead workers: %s", error)

    def _rehand(self, jobs: Sequence[ScheduledJob]) -> None:
        """The dispatcher returned these claims to pending at stop: give them back to the queue."""
        try:
            hand_over_committed(self.queue, [Occurrence.of(job) for job in jobs])
        except ScheduleError as error:
            logger.warning("could not re-enqueue %d released fires (%s); reconciler heals", len(jobs), error)
