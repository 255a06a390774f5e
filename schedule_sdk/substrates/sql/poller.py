"""``DuePoller``: the loop that drives the embedded ``sql`` substrate.

It sleeps until the next due instant, is woken early by this process's commits (through the
queue's :class:`~schedule_sdk.ports.CommitSignal`) and by other processes (PostgreSQL
``LISTEN/NOTIFY``, SQLite ``data_version``), re-reads at least every ``poll_interval`` as a safety
net, and claims due rows in batches for the :class:`~schedule_sdk.ports.Dispatcher`. It claims
a row :data:`~schedule_sdk.core.claim_timing.CLAIM_AHEAD` before its ``run_at`` on the store's clock
(:func:`~schedule_sdk.core.claim_timing.claim_horizon`; at its ``run_at`` on a clock that does not move by
itself), so the claim's round trip is over when the row falls due, and nothing while the store's
clock is unknown. It never fires early: the fire path holds a job claimed ahead until its
``run_at`` has passed on the store's clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from schedule_sdk.core.claim_timing import EXTRA_LEAD, claim_horizon, claim_lead
from schedule_sdk.domain.backoff import retrying
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.leases import Lease
from schedule_sdk.ports import Clock, CommitSignal, Dispatcher, JobStore

logger = logging.getLogger(__name__)

#: A claim is not started in the ``CLEAR_BEFORE`` seconds before the due instant of a job this
#: poller claimed ahead, nor in the ``CLEAR_AFTER`` after it: its client side would hold the GIL
#: just when the held job's thread wakes to fire. It starts ``CLEAR_BEFORE`` before that instant
#: instead, its horizon that much further ahead (:meth:`DuePoller._clear_of_fires`; at most
#: :data:`~schedule_sdk.core.claim_timing.EXTRA_LEAD` earlier than planned). Without it, claims
#: ahead of a regular schedule fall on the due instants of the jobs claimed before them (a series
#: of jobs due closer together than ``CLAIM_AHEAD``).
CLEAR_BEFORE = timedelta(milliseconds=3)
CLEAR_AFTER = timedelta(milliseconds=1)


class DuePoller:
    """Claims due jobs (just ahead of their due instant, on a real-time clock) and hands them to
    the dispatcher."""

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
        #: Guards the flags below against the callbacks' threads: a capacity or a slot freed
        #: while a claim is under way is noted (``_freed``) and judged by that claim's answer
        #: (what it left waiting, whether it was short of room) when it ends, rather than waking
        #: the poller for another claim that would, most often, find what this one just took.
        self._flags = threading.Lock()
        self._in_cycle = False
        self._freed: set[str] = set()
        #: The due instants, in order, of the jobs the last claims took ahead of them.
        self._held_dues: list[datetime] = []
        #: How much further than ``CLAIM_AHEAD`` the next claim looks (it starts that much earlier).
        self._extra_lead = timedelta(0)
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
        self._on_freed("capacity")

    def _slot_freed(self) -> None:
        """A concurrency slot freed (in any process): worth a claim only if rows wait for one."""
        self._on_freed("slot")

    def _on_freed(self, what: str) -> None:
        with self._flags:
            if self._in_cycle:  # judged when the claim under way ends (_worth_again)
                self._freed.add(what)
                return
            worth = self._waiting or (what == "capacity" and self._starved)
        if worth:
            self._wakeup.set()

    def _worth_again(self, freed: set[str]) -> bool:
        """Whether what freed during a claim is worth another claim at once, by that claim's
        answer (poller thread only)."""
        return bool(freed) and (self._waiting or ("capacity" in freed and self._starved))

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
            wait=self._sleep,
            errors=(ScheduleError,),
            what="poller",
            logger=logger,
        )

    def _sleep(self, seconds: float) -> None:
        """Wait ``seconds`` for a wake-up. A claim clears the wake-up as it starts, and with it
        a stop's that came just before: the stop, set first, is looked at here."""
        if not self._stop.is_set():
            self._wakeup.wait(seconds)

    def _cycle(self) -> float:
        """Claim what is due; return how long to sleep (0: go again at once)."""
        with self._flags:
            self._in_cycle, self._freed = True, set()
        try:
            sleep = self._claim()
        finally:  # a failed claim is retried anyway (its wait ends on the next wake-up)
            with self._flags:
                self._in_cycle = False
                freed = self._freed
        return 0.0 if self._worth_again(freed) else sleep

    def _claim(self) -> float:
        self._planned = None
        self._wakeup.clear()
        self._waiting = True  # until the claim answers (and after a failed one)
        capacity = self._dispatcher.capacity()
        room = min(self._batch, capacity)
        self._starved = room == capacity
        if room <= 0:
            return self._poll  # the dispatcher wakes us when capacity frees up
        horizon = claim_horizon(self._clock)
        if horizon is None:  # the offset from the store's clock is unknown or beyond its bound
            return self._poll
        horizon, self._extra_lead = horizon + self._extra_lead, timedelta(0)
        claimed, next_due, self._waiting = self._store.claim_due_planned(
            horizon, room, self._dispatcher.worker_id, self._lease.until(horizon)
        )
        if claimed:
            self._dispatcher.submit(claimed)
        self._note_held(claimed)
        if len(claimed) == room:
            return 0.0
        self._starved = False  # it took everything due: freed room would find nothing more
        # Keyed rows still due after the claim wait for a slot and are not in the plan: a fire of
        # this process ending wakes us (_capacity_freed), another's through the store's watch.
        if next_due is None:
            return self._poll
        self._planned = next_due
        # until the row is within the claim's horizon on the claim's own reading of the store's
        # clock (which trails ``now()`` by the reading's error): waking by ``now()`` would claim
        # nothing, then go again
        until = claim_horizon(self._clock) or self._clock.now()
        planned = next_due - claim_lead(self._clock)
        self._extra_lead = planned - self._clear_of_fires(planned)
        return max(0.0, min((next_due - self._extra_lead - until).total_seconds(), self._poll))

    def _note_held(self, claimed: Sequence[ScheduledJob]) -> None:
        """Keep the due instants of the jobs claimed ahead (those of earlier claims that are
        past are dropped)."""
        past = self._clock.now() - CLEAR_AFTER
        dues = {due for due in self._held_dues if due > past}
        dues.update(job.run_at for job in claimed if job.run_at > past)
        self._held_dues = sorted(dues)

    def _clear_of_fires(self, wake: datetime) -> datetime:
        """``wake`` (a store-clock instant to claim at), or, if it falls within ``CLEAR_BEFORE``
        before or ``CLEAR_AFTER`` after the due instant of a job claimed ahead, ``CLEAR_BEFORE``
        before that instant (and before any such instant that one then falls on); ``wake`` itself
        if that is more than ``EXTRA_LEAD`` earlier."""
        cleared = wake
        for due in reversed(self._held_dues):
            if due - CLEAR_BEFORE < cleared < due + CLEAR_AFTER:
                cleared = due - CLEAR_BEFORE
        return cleared if wake - cleared <= EXTRA_LEAD else wake
