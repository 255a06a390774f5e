"""``DuePoller``: the loop that drives the embedded ``sql`` substrate.

It sleeps until the next due instant, is woken early by this process's commits (through the
queue's :class:`~schedule_sdk.ports.CommitSignal`) and by other processes (PostgreSQL
``LISTEN/NOTIFY``, SQLite ``data_version``), re-reads at least every ``poll_interval`` as a safety
net, and claims due rows in batches for the :class:`~schedule_sdk.ports.Dispatcher`. It never
fires early: a row is claimed only when its ``run_at`` is at or before the store's clock's now
(:func:`~schedule_sdk.ports.claim_time`: the clock's ``claim_now``), and nothing is claimed while
that is unknown.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from schedule_sdk.domain.backoff import retrying
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.leases import Lease
from schedule_sdk.ports import Clock, CommitSignal, Dispatcher, JobStore, claim_time

logger = logging.getLogger(__name__)


class DuePoller:
    """Claims due jobs at their due instant and hands them to the dispatcher."""

    def __init__(
        self,
        *,
        store: JobStore,
        queue: CommitSignal,
        dispatcher: Dispatcher,
        clock: Clock,
        lease_seconds: float = 30.0,
        batch_size: int = 500,
        poll_interval: float = 1.0,
    ) -> None:
        self._store = store
        self._queue = queue
        self._dispatcher = dispatcher
        self._clock = clock
        self._lease = Lease(lease_seconds)
        self._batch = batch_size
        self._poll = poll_interval
        self._wakeup = threading.Event()
        self._stop = threading.Event()
        self._planned: datetime | None = None
        #: The last cycle claimed all the dispatcher had room for (or it had none): freed
        #: capacity is then worth a cycle.
        self._starved = False
        #: The last claim left rows with a concurrency key due, waiting for a slot (or a cycle is
        #: under way): a freed slot (a fire of this process ending, or another's announced by
        #: the store's watch) is then worth a cycle. Otherwise neither changes what a claim would
        #: find: rows that fall due later are in the plan, rows made pending again announce
        #: themselves.
        self._waiting = True
        self._thread: threading.Thread | None = None
        self._cleanups: list[Callable[[], None]] = []

    def wake(self, due_at: datetime | None = None) -> None:
        """Re-plan now, unless ``due_at`` is known to be no earlier than the planned wake-up."""
        planned = self._planned
        if due_at is None or planned is None or due_at < planned:
            self._wakeup.set()

    def _capacity_freed(self) -> None:
        """A fire of this process ended (its outcome recorded): worth a claim if the last one was
        short of room, or left rows waiting for a slot this fire may have held."""
        if self._starved or self._waiting:
            self._wakeup.set()

    def _slot_freed(self) -> None:
        """A concurrency slot freed (in any process): worth a claim only if rows wait for one."""
        if self._waiting:
            self._wakeup.set()

    def start(self) -> None:
        self._stop.clear()
        self._dispatcher.on_capacity = self._capacity_freed
        # first: it may refuse (ListenNotDelivered)
        watching = self._store.watch(self.wake, on_slot_freed=self._slot_freed)
        self._cleanups = [self._queue.subscribe(self.wake), watching]
        self._thread = threading.Thread(target=self._run, name="schedule-sdk-poller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for cleanup in self._cleanups:
            cleanup()
        self._cleanups.clear()

    def peers_dead(self, worker_ids: Sequence[str]) -> None:
        """Nothing to take over: claims are released through the store."""

    def _run(self) -> None:
        # Both the planned sleep and a retry delay end early on a wake-up (stop wakes it too).
        retrying(
            self._cycle,
            stop=self._stop,
            wait=self._wakeup.wait,
            errors=(ScheduleError,),
            what="poller",
            logger=logger,
        )

    def _cycle(self) -> float:
        """Claim what is due; return how long to sleep (0: go again at once)."""
        self._planned = None
        self._wakeup.clear()
        self._waiting = True  # a slot freed during this claim may be one it found taken
        capacity = self._dispatcher.capacity()
        room = min(self._batch, capacity)
        self._starved = room == capacity  # set before the claim: a fire may end during it
        if room <= 0:
            return self._poll  # the dispatcher wakes us when capacity frees up
        now = claim_time(self._clock)
        if now is None:  # the offset from the store's clock is unknown or beyond its bound
            return self._poll
        claimed, next_due, self._waiting = self._store.claim_due_planned(
            now, room, self._dispatcher.worker_id, self._lease.until(now)
        )
        if claimed:
            self._dispatcher.submit(claimed)
        if len(claimed) == room:
            return 0.0
        self._starved = False  # it took everything due: freed room would find nothing more
        # Keyed rows still due after the claim wait for a slot and are not in the plan: a fire of
        # this process ending wakes us (_capacity_freed), another's through the store's watch.
        if next_due is None:
            return self._poll
        self._planned = next_due
        # until the row is due on the claim's own reading of the store's clock (which trails
        # ``now()`` by the reading's error): waking by ``now()`` would claim nothing, then go again
        until = claim_time(self._clock) or self._clock.now()
        return max(0.0, min((next_due - until).total_seconds(), self._poll))
