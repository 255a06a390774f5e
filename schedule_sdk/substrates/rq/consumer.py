"""``WorkerThread``: the in-process consumer of the released entries, safe inside a threaded host app.

It pops released batches through the :class:`~schedule_sdk.ports.DelayIndex` port
(:meth:`~schedule_sdk.ports.DelayIndex.pop_released`, waiting up to a second for the first,
clearing the released marks of the entries it already fired on the way), holds a batch released
ahead of its due instant until the claim may take it, and hands the occurrence keys to the fire
runtime, which claims them ahead (:data:`~schedule_sdk.core.claim_timing.CLAIM_AHEAD`) for the worker's fire
path to hold until due. On Redis
that is two round trips per pop at steady rates (each one is also a GIL hand-off, which is what
lateness is made of; see :class:`~schedule_sdk.substrates.rq.queue.RQExecutionQueue`). It
installs no signal handlers, never subscribes to RQ's command channel (whose shutdown command
``os.kill``s the host with SIGINT) and adds no log handlers. Its stop interrupts a pop that waits
(:meth:`~schedule_sdk.ports.DelayIndex.interrupt`), so it ends without waiting out the pop's
timeout.

Why not RQ's ``SimpleWorker`` in a thread? It issues about twenty Redis commands
per job (registries, heartbeats, status), round trips the fire path cannot afford; the
released jobs are still ordinary RQ jobs, so stock ``rq worker --serializer
rq.serializers.JSONSerializer`` processes can execute them alongside (or instead of) this thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Iterator

from schedule_sdk.domain.backoff import retrying
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.ports import DelayIndex, ReleasedBatch
from schedule_sdk.substrates.rq.entries import hold_until
from schedule_sdk.substrates.rq.fire import DispatchRuntime

logger = logging.getLogger(__name__)


class WorkerThread:
    """Consumes the released batches of ``index`` in a daemon thread, firing through ``runtime``;
    the released marks of fired entries are cleared with the next pop."""

    def __init__(
        self,
        *,
        index: DelayIndex,
        runtime: DispatchRuntime,
        batch: int = 50,
        poll_seconds: int = 1,
    ) -> None:
        self._index = index
        self._runtime = runtime
        self._batch = batch
        self._poll = poll_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fired: list[str] = []  # entries whose released marks are still to clear
        self._name = ""  # this run's name on the index: what interrupts its pop (see start)

    def start(self) -> None:
        self._stop.clear()
        self._name = uuid.uuid4().hex  # an interrupt left over from a stop before ends no pop of this run
        self._thread = threading.Thread(target=self._run, name="schedule-sdk-rq-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread: a pop waiting for released entries is interrupted, so this returns as
        soon as the batch under way (if any) is handed over or put back."""
        self._stop.set()
        if self._thread is not None:
            self._index.interrupt(self._name)
            self._thread.join(timeout)
            if self._thread.is_alive():
                logger.warning("the RQ worker thread did not stop within %.1fs", timeout)
            self._thread = None

    def _run(self) -> None:
        retrying(
            self._step,
            stop=self._stop,
            errors=(ScheduleError,),
            # never lose the thread; released entries are healed by the reconciler
            unexpected=(Exception,),
            what="RQ worker",
            logger=logger,
        )
        try:
            with self._marks() as marks:
                if marks:
                    self._index.done(marks)
        except ScheduleError as error:  # stale marks only make the reconciler wait before healing
            logger.warning("RQ worker: could not clear released marks at stop: %s", error)

    def _step(self) -> float:
        """Pop the released batches (waiting up to ``poll_seconds``) and fire them."""
        with self._marks() as marks:
            taken = self._index.pop_released(self._batch, self._poll, marks, consumer=self._name)
        if taken:
            self._execute(taken)
        return 0.0

    def _execute(self, taken: list[ReleasedBatch]) -> None:
        batches = sorted(taken, key=lambda batch: batch.due_ms or 0.0)  # a hold delays no earlier fire
        self._runtime.holding = [member for batch in batches for member in batch.members]
        for batch in batches:
            # released ahead: held until the claim may take it (its due instant less the claim's
            # lead; the fire path holds what it claims until the due instant itself)
            due_ms = None if batch.due_ms is None else batch.due_ms - self._runtime.ahead_ms
            hold_until(due_ms, self._stop.is_set, self._runtime.store_seconds)
            if self._runtime.take(batch.members):
                self._fired += batch.members  # cleared with the next pop (or when idle)

    @contextlib.contextmanager
    def _marks(self) -> Iterator[list[str]]:
        """The released marks to clear now; handed back for a later try if clearing fails."""
        marks, self._fired = self._fired, []
        try:
            yield marks
        except BaseException:
            self._fired = marks + self._fired
            raise
