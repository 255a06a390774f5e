"""``DuePump``: the SDK's own due-time loop for the ``rq`` substrate (RQ's scheduler is too coarse).

It drives the delay index through the :class:`~schedule_sdk.ports.DelayIndex` port only (the
Redis binding is :class:`~schedule_sdk.substrates.rq.queue.RQExecutionQueue`). Every
``schedule-sdk`` worker runs one; exactly one of them is active, the holder of the releaser lease
(:meth:`DelayIndex.lead`: a Redis lock, renewed every ``renew_every`` seconds, ``lock_ttl``
seconds to live, given up on a clean stop). When the holder dies, another pump takes over within
``lock_ttl + retry_every``, or at once when the worker registry declares the holder dead: the
lease's token names the holder's worker id, and :meth:`DuePump.drop_lock_of` deletes the lease
(:meth:`DelayIndex.depose`) if a dead worker holds it.

The active pump sleeps until ``RELEASE_AHEAD`` before the earliest due score, woken early
(:meth:`DelayIndex.wakeups`) when a commit adds an earlier entry; it then releases every entry whose
score is at or before now + ``RELEASE_AHEAD``, in batches, and plans again. An RQ job carries the
due instant of its entries in its meta, and a consumer holds it until then (so the Redis round
trips to the consumer are made before the instant, not after it). The scores are ``run_at``
instants of the store's clock, so the pump reads "now" from the worker's clock corrected by its
offset from the store's (:func:`~schedule_sdk.core.claim_timing.claim_time`), never from the process's own
clock: a pump on a host whose clock runs behind would release late, one whose clock runs ahead
early. A pump that may not claim (its offset is unknown or beyond its bound) does not lead: it
gives up the lease, and another worker's pump takes it. Nothing fires early: the claim takes a
row only when its ``run_at`` is at or before the store's clock as the claiming process knows it
(plus :data:`~schedule_sdk.core.claim_timing.CLAIM_AHEAD` inside a worker, whose fire path then holds the job
until its ``run_at``).
A backend failure (``QueueUnavailable``) is retried with backoff; leadership is re-taken (with the same token
if the lock survived) once Redis answers again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence

from schedule_sdk.core.claim_timing import claim_time
from schedule_sdk.domain.backoff import retrying
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.ports import Clock, DelayIndex, WakeUps

logger = logging.getLogger(__name__)

#: The last stretch of a wait for a due instant that the pump sleeps rather than waiting on the
#: wake-up channel (whose timeout is a whole number of milliseconds, rounded up): seconds.
EXACT_TAIL = 0.002
#: How long before their due instant entries are released (seconds): the RQ round trips to a
#: consumer then happen before the instant, and the consumer holds each job until its due
#: instant (carried in the job's meta) before it claims.
RELEASE_AHEAD = 0.005


class DuePump:
    def __init__(
        self,
        queue: DelayIndex,
        *,
        owner: str | None = None,
        lock_ttl: float = 3.0,
        renew_every: float = 1.0,
        retry_every: float = 0.5,
        batch: int = 1000,
        clock: Clock | None = None,
    ) -> None:
        self.queue = queue
        #: The store's clock as this worker knows it (None: this process's clock is taken as the
        #: store's, as in tests of the pump alone).
        self.clock = clock
        self.lock_ttl = lock_ttl
        self.renew_every = renew_every
        self.retry_every = retry_every
        self.batch = batch
        #: The lock's value: the holder's worker id (default: the pid), then ``/`` and 32 hex digits.
        self.token = f"{owner or os.getpid()}/{uuid.uuid4().hex}"
        self.leading = False
        self.released = 0  #: entries this pump released (for tests and metrics)
        self._renewed = 0.0
        self._retry_now = threading.Event()
        self._wakeups: WakeUps | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="schedule-sdk-rq-pump", daemon=True)
        self._thread.start()

    def drop_lock_of(self, worker_ids: Sequence[str]) -> bool:
        """Delete the pump lock if one of these (dead) workers holds it, and try to take it at
        once; True if it was deleted."""
        if not worker_ids:
            return False
        dropped = self.queue.depose(worker_ids)
        if dropped:
            logger.warning("pump lock of dead worker dropped; taking over")
            self._retry_now.set()
        return dropped

    def stop(self) -> None:
        self._stop.set()
        self._retry_now.set()
        self.queue.nudge()  # wake a sleeping pump at once
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._close_wakeups()
        if self.leading:
            try:
                self.queue.resign(self.token)
            except ScheduleError as error:
                logger.warning("could not release the pump lock (%s); it expires by itself", error)
            self.leading = False

    # -- loop ------------------------------------------------------------------------------------

    def _run(self) -> None:
        retrying(self._step, stop=self._stop, errors=(ScheduleError,), what="pump", logger=logger)

    def _step(self) -> float | None:
        """Lead, release what is due and sleep until the next due entry (None: not the leader)."""
        if self._store_ms() is None:  # may not claim: leave the lead to a pump that may
            self._step_down()
            self._retry_now.wait(self.retry_every)
            self._retry_now.clear()
            return None
        try:
            if not self._lead():
                self._retry_now.wait(self.retry_every)
                self._retry_now.clear()
                return None  # no progress: the backoff stands
            timeout = self._cycle()
        except ScheduleError:
            self.leading = False  # leadership is re-taken once the backend answers again
            self._close_wakeups()
            raise
        self._sleep(timeout)
        return 0.0

    def _lead(self) -> bool:
        """Take or keep the leadership; True while this pump holds the lock."""
        now = time.monotonic()
        if self.leading and now - self._renewed < self.renew_every:
            return True
        held = self.queue.lead(self.token, self.lock_ttl)
        if held and not self.leading:
            logger.info("pump %s is now active for queue %s", self.token, self.queue.queue_name)
            self._wakeups = self.queue.wakeups()
        elif not held and self.leading:
            logger.warning("pump %s lost its lock", self.token)
            self._close_wakeups()
        self.leading = held
        self._renewed = now
        return held

    def _store_ms(self) -> float | None:
        """Now on the store's clock, epoch ms, as a claim reads it (None: may not claim)."""
        if self.clock is None:
            return time.time() * 1000.0
        now = claim_time(self.clock)
        return None if now is None else now.timestamp() * 1000.0

    def _step_down(self) -> None:
        if self.leading:
            logger.warning("pump %s gives up the lead: its clock is not known to be in step", self.token)
            self._close_wakeups()
            try:
                self.queue.resign(self.token)
            except ScheduleError as error:
                logger.warning("could not release the pump lock (%s); it expires by itself", error)
            self.leading = False

    def _cycle(self) -> float:
        """Release what is due within ``RELEASE_AHEAD``; return how long to sleep (0: at once)."""
        now = self._store_ms()
        if now is None:
            return 0.0  # the next step steps down
        released, earliest = self.queue.release(now + RELEASE_AHEAD * 1000.0, self.batch)
        self.released += len(released)
        if len(released) == self.batch:
            return 0.0
        if earliest is None:
            return self.renew_every
        # from now, not from before the release (which took round trips): the sleep starts now
        after = self._store_ms()
        if after is None:
            return 0.0
        wait = (earliest - after) / 1000.0 - RELEASE_AHEAD
        return max(0.0, min(wait, self.renew_every))

    def _sleep(self, timeout: float) -> None:
        """Wait ``timeout`` seconds for a wake-up, ending on time: the wake-up wait (a socket
        timeout) may be rounded up to whole milliseconds, so it stops ``EXACT_TAIL`` seconds short
        and a plain sleep, far finer, covers the rest. An entry committed
        during that last stretch is due at most that much earlier."""
        deadline = time.monotonic() + timeout
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._wakeups is None:
                return
            if remaining <= EXACT_TAIL:
                time.sleep(remaining)
                return
            try:
                if self._wakeups.wait(remaining - EXACT_TAIL):
                    return  # an earlier entry was committed (or stop): plan again
            except ScheduleError as error:
                logger.warning("pump: %s", error)
                self._close_wakeups()
                self.leading = False
                return

    def _close_wakeups(self) -> None:
        wakeups, self._wakeups = self._wakeups, None
        if wakeups is not None:
            wakeups.close()
