"""SQLite: WAL checkpoints off the writers' path.

In WAL mode with ``synchronous=NORMAL`` a commit appends to the log and does not wait for the disk;
the disk is waited for when the log is copied back into the database, a *checkpoint* (copy, then
fsync). By default SQLite runs one inside the commit that takes the log past
1,000 pages, while that writer still holds this process's writer lock: a claim queued behind it
waits for the fsync, and under a steady stream of fires (a claim and an outcome each) that wait
made most of the tail of fire lateness (bench/independent.py's W3 measures it).

So the store's writer connection never checkpoints by itself (``wal_autocheckpoint=0``) and a
:class:`Checkpointer` thread runs a ``PASSIVE`` checkpoint (which waits for no reader and no
writer) every :attr:`~Checkpointer.every` commits, and after a quiet half second once anything was
committed: the log stays about as short as SQLite's own policy keeps it. A *light* commit (a
worker's heartbeat: one small row rewritten) does not call for that quiet-spell checkpoint by
itself: while only light commits wait, the thread checkpoints them once the first is
:attr:`~Checkpointer.linger` seconds old (or ``every`` of them came), so an idle worker does not
copy and fsync a page or two after each beat, and its log still stays a few dozen pages long. A
commit that changed no row (a claim that found nothing due) wrote nothing to the log: the store
does not count it.
Once everything committed is checkpointed, the thread sleeps until the next commit wakes it, and
ends if none comes for :attr:`~Checkpointer.park` seconds (the next commit starts another).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


class Checkpointer:
    """Runs ``checkpoint`` on a thread of its own after every ``every`` commits (counted with
    :meth:`committed`), ``idle`` seconds after the last commit not yet checkpointed, or, when all
    of those are light, ``linger`` seconds after the first of them; the thread ends after ``park``
    quiet seconds with everything checkpointed."""

    def __init__(
        self,
        checkpoint: Callable[[], None],
        *,
        every: int = 100,
        idle: float = 0.5,
        park: float | None = None,
        linger: float | None = None,
    ) -> None:
        self._checkpoint = checkpoint
        self.every = every
        self._idle = idle
        #: Seconds the thread sleeps, all copied, for a commit to come before it ends (default
        #: ``60 * idle``: a worker's heartbeat commits every second, so its thread stays).
        self.park = 60 * idle if park is None else park
        #: Seconds light commits alone wait for their checkpoint, from the first (default
        #: ``60 * idle``).
        self.linger = 60 * idle if linger is None else linger
        self._commits = 0  # counted by the writers (under the store's writer lock)
        self._done = 0  # the count at the last checkpoint
        self._light = True  # every commit since the last checkpoint was light
        self._since = 0.0  # monotonic: the first commit since the last checkpoint
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._parked = False  # the thread sleeps until a commit wakes it
        self._lingering = False  # the thread sleeps toward ``linger``: a full commit wakes it

    def committed(self, *, light: bool = False) -> None:
        """A writer committed (cheap: called after every write transaction); ``light``: a commit
        of a row or two, which alone need not be checkpointed soon (a heartbeat)."""
        if self._commits == self._done:
            self._since = time.monotonic()
        if not light:
            self._light = False
        self._commits += 1  # before the parked check: a thread parking sees it, or is woken
        if self._thread is None or self._pid != os.getpid():
            self._start()
        if self._parked or self._commits - self._done >= self.every or (self._lingering and not light):
            self._parked = self._lingering = False
            self._wake.set()

    def _start(self) -> None:
        with self._lock:
            if self._stop.is_set() or (self._thread is not None and self._pid == os.getpid()):
                return
            self._pid = os.getpid()  # a forked child checkpoints with a thread of its own
            name = "schedule-sdk-sqlite-checkpoint"
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        wait, lingered = self._idle, False
        while not self._stop.is_set():
            woken = self._wake.wait(wait)
            self._wake.clear()
            wait = self._idle
            if self._stop.is_set():
                return
            commits = self._commits
            if commits == self._done:  # quiet, all copied: sleep until the next commit
                self._parked = True
                if self._commits == self._done:  # else a commit came in meanwhile
                    self._wake.wait(self.park)
                self._parked = False
                with self._lock:
                    if self._commits == self._done:  # quiet that long: the thread ends (the next
                        self._thread = None  # commit starts another), so a store never closed
                        return  # leaves none
                self._wake.clear()  # the commit that woke it: a quiet ``idle`` first
                continue
            if lingered and woken and commits - self._done < self.every:
                lingered = False  # a full commit woke it: a quiet ``idle`` first, as after any
                continue
            lingered = False
            if self._light and commits - self._done < self.every:
                left = self._since + self.linger - time.monotonic()
                if left > 0:  # light commits only: sleep toward the first one's linger
                    self._lingering = True
                    if self._light:  # else a full commit came meanwhile (it may not have woken it)
                        wait, lingered = left, True
                    else:
                        self._lingering = False
                    continue
            self._lingering = False
            self._light, self._since = True, time.monotonic()  # the next checkpoint's from here on
            try:
                self._checkpoint()
            except Exception as error:  # the next commit's count tries again; SQLite stays correct
                self._light = False  # tried again after a quiet ``idle``
                logger.debug("WAL checkpoint failed: %s", error)
                continue
            self._done = commits

    def close(self) -> None:
        """Stop the thread (one last checkpoint is SQLite's, when the last connection closes)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread() and self._pid == os.getpid():
            thread.join(timeout=2)
