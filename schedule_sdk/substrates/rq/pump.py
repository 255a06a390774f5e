"""``DuePump``: the SDK's own due-time loop for the ``rq`` substrate (RQ's scheduler is too coarse).

Every ``schedule-sdk`` worker runs one; exactly one of them is active, the holder of a Redis lock
(``SET NX PX``, renewed every ``renew_every`` seconds, ``lock_ttl`` seconds to live, released on
a clean stop). When the holder dies, another pump takes over within ``lock_ttl + retry_every``,
or at once when the worker registry declares the holder dead: the lock's value names the holder's
worker id, and :meth:`DuePump.drop_lock_of` deletes the lock (compare-and-delete) if a dead worker
holds it.

The active pump sleeps until ``RELEASE_AHEAD`` (5 ms) before the earliest due score, woken early
by a pub/sub message when a commit adds an earlier entry; it then releases every entry whose
score is at or before now + ``RELEASE_AHEAD``, in batches, and plans again. An RQ job carries the
due instant of its entries in its meta, and a consumer holds it until then (so the Redis round
trips to the consumer are made before the instant, not after it). Nothing fires early: the
claim takes a row only when its ``run_at`` is at or before the claiming process's clock.
A Redis failure is retried with backoff; leadership is re-taken (with the same token
if the lock survived) once Redis answers again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from redis.exceptions import RedisError

from schedule_sdk.domain.backoff import Reconnect
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.substrates.rq import plumbing
from schedule_sdk.substrates.rq.queue import RQExecutionQueue

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
        queue: RQExecutionQueue,
        *,
        owner: str | None = None,
        lock_ttl: float = 3.0,
        renew_every: float = 1.0,
        retry_every: float = 0.5,
        batch: int = 1000,
    ) -> None:
        self.queue = queue
        self.lock_ttl = lock_ttl
        self.renew_every = renew_every
        self.retry_every = retry_every
        self.batch = batch
        #: The lock's value: the holder's worker id (default: the pid), then ``/`` and 32 hex digits.
        self.token = f"{owner or os.getpid()}/{uuid.uuid4().hex}"
        self.leading = False
        self.released = 0  #: entries this pump released (for tests and metrics)
        self._renewed = 0.0
        self._renew = queue.connection.register_script(plumbing.RENEW)
        self._unlock = queue.connection.register_script(plumbing.UNLOCK)
        self._drop_lock_of = queue.connection.register_script(plumbing.DROP_LOCK_OF)
        self._retry_now = threading.Event()
        self._pubsub: Any = None
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
        dropped = bool(self._drop_lock_of(keys=[self.queue.keys.pump], args=list(worker_ids)))
        if dropped:
            logger.warning("pump lock of dead worker dropped; taking over")
            self._retry_now.set()
        return dropped

    def stop(self) -> None:
        self._stop.set()
        self._retry_now.set()
        try:  # wake a sleeping pump at once
            self.queue.connection.publish(self.queue.keys.wake, "stop")
        except RedisError:
            pass
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._close_pubsub()
        if self.leading:
            try:
                self._unlock(keys=[self.queue.keys.pump], args=[self.token])
            except RedisError as error:
                logger.warning("could not release the pump lock (%s); it expires by itself", error)
            self.leading = False

    # -- loop ------------------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = Reconnect()
        while not self._stop.is_set():
            try:
                if not self._lead():
                    self._retry_now.wait(self.retry_every)
                    self._retry_now.clear()
                    continue
                timeout = self._cycle()
                backoff.reset()
            except (RedisError, ScheduleError) as error:
                delay = backoff.next()
                logger.warning("pump: %s; retrying in %.2fs", error, delay)
                self.leading = False
                self._close_pubsub()
                self._stop.wait(delay)
                continue
            self._sleep(timeout)

    def _lead(self) -> bool:
        """Take or keep the leadership; True while this pump holds the lock."""
        now = time.monotonic()
        if self.leading and now - self._renewed < self.renew_every:
            return True
        ttl_ms = int(self.lock_ttl * 1000)
        connection = self.queue.connection
        held = bool(self._renew(keys=[self.queue.keys.pump], args=[self.token, ttl_ms])) or bool(
            connection.set(self.queue.keys.pump, self.token, nx=True, px=ttl_ms)
        )
        if held and not self.leading:
            logger.info("pump %s is now active for queue %s", self.token, self.queue.queue_name)
            self._pubsub = connection.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
            self._pubsub.subscribe(self.queue.keys.wake)
        elif not held and self.leading:
            logger.warning("pump %s lost its lock", self.token)
            self._close_pubsub()
        self.leading = held
        self._renewed = now
        return held

    def _cycle(self) -> float:
        """Release what is due within ``RELEASE_AHEAD``; return how long to sleep (0: at once)."""
        released, earliest = self.queue.release((time.time() + RELEASE_AHEAD) * 1000.0, self.batch)
        self.released += len(released)
        if len(released) == self.batch:
            return 0.0
        if earliest is None:
            return self.renew_every
        wait = (earliest - time.time() * 1000.0) / 1000.0 - RELEASE_AHEAD
        return max(0.0, min(wait, self.renew_every))

    def _sleep(self, timeout: float) -> None:
        """Wait ``timeout`` seconds for the wake-up channel, ending on time: the channel's wait
        (a socket timeout) is rounded up to whole milliseconds, so it stops ``EXACT_TAIL``
        seconds short and a plain sleep, precise to tens of microseconds, covers the rest. An
        entry committed during that last stretch is due at most that much earlier."""
        deadline = time.monotonic() + timeout
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._pubsub is None:
                return
            if remaining <= EXACT_TAIL:
                time.sleep(remaining)
                return
            try:
                if self._pubsub.get_message(timeout=remaining - EXACT_TAIL) is not None:
                    return  # an earlier entry was committed (or stop): plan again
            except RedisError as error:
                logger.warning("pump: lost the wake-up channel (%s)", error)
                self._close_pubsub()
                self.leading = False
                return

    def _close_pubsub(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            try:
                pubsub.close()
            except Exception:
                pass
