"""``RQRunner``: what a ``schedule-sdk`` worker runs on the ``rq`` substrate: the due-time pump
(active in one process at a time) and an in-process consumer thread whose fires go to the
worker's :class:`~schedule_sdk.ports.Dispatcher`.

The pump, the consumer and the fire runtime see the delay index only through the
:class:`~schedule_sdk.ports.DelayIndex` port (its Redis binding is
:class:`~schedule_sdk.substrates.rq.queue.RQExecutionQueue`); the composition root builds this
runner (``schedule_sdk/bootstrap/substrates.py``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import Clock, DelayIndex, Dispatcher, JobStore, Occurrence
from schedule_sdk.substrates.rq.consumer import WorkerThread
from schedule_sdk.substrates.rq.fire import DispatchRuntime
from schedule_sdk.substrates.rq.pump import DuePump

logger = logging.getLogger(__name__)


class RQRunner:
    def __init__(
        self,
        *,
        queue: DelayIndex,
        store: JobStore,
        dispatcher: Dispatcher,
        clock: Clock,
        lease_seconds: float = 30.0,
        pump: DuePump | None = None,
    ) -> None:
        self.queue = queue
        self.dispatcher = dispatcher
        self.pump = pump or DuePump(queue, owner=dispatcher.worker_id, clock=clock)
        self.runtime = DispatchRuntime(
            dispatcher=dispatcher, store=store, queue=queue, clock=clock, lease_seconds=lease_seconds
        )
        self.worker = WorkerThread(index=queue, runtime=self.runtime)

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
        except ScheduleError as error:  # the lock expires by itself
            logger.warning("could not check the pump lock of dead workers: %s", error)

    def _rehand(self, jobs: Sequence[ScheduledJob]) -> None:
        """The dispatcher returned these claims to pending at stop (committed rows): put their
        occurrences back in the delay index at their due instants."""
        try:
            self.queue.activate([(Occurrence.of(job).key, job.run_at.timestamp() * 1000.0) for job in jobs])
        except ScheduleError as error:
            logger.warning("could not re-enqueue %d released fires (%s); reconciler heals", len(jobs), error)
