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
itself: while only light commits wait, no thread runs for them; the first commit that finds the
oldest of them :attr:`~Checkpointer.linger` seconds old (or ``every`` of them come) starts one,
so an idle worker does not copy and fsync a page or two after each beat, and its log still stays
a few dozen pages long. A commit that changed no row (a claim that found nothing due) wrote
nothing to the log: the store does not count it.
Once everything committed is checkpointed (or only light commits wait), the thread sleeps until
the next commit wakes it, and ends if none comes for :attr:`~Checkpointer.park` seconds (the next
commit that needs one starts another): a store that is never closed leaves no thread behind for
long. A stopping worker ends it at once (:meth:`~Checkpointer.rest`, through the store's
``quiesce``).
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
    of those are light, at the first commit ``linger`` seconds after the first of them; the thread
    ends after ``park`` quiet seconds with nothing but light commits left."""

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
        #: ``4 * idle``: while fires commit, the thread stays; a stopped worker's ends soon).
        self.park = 4 * idle if park is None else park
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

    def committed(self, *, light: bool = False) -> None:
        """A writer committed (cheap: called after every write transaction); ``light``: a commit
        of a row or two, which alone need not be checkpointed soon (a heartbeat)."""
        if self._commits == self._done:
            self._since = time.monotonic()
        if not light:
            self._light = False
        self._commits += 1  # before the parked check: a thread parking sees it, or is woken
        if not self._waits():
            return  # light commits only, not yet due: no thread for them
        if self._thread is None or self._pid != os.getpid():
            self._start()
        if self._parked or self._commits - self._done >= self.every:
            self._parked = False
            self._wake.set()

    def _waits(self) -> bool:
        """Whether what was committed since the last checkpoint calls for one: a full commit,
        ``every`` commits, or light ones whose first is ``linger`` seconds old."""
        if not self._light or self._commits - self._done >= self.every:
            return True
        return self._commits != self._done and time.monotonic() - self._since >= self.linger

    def _start(self) -> None:
        with self._lock:
            if self._stop.is_set() or (self._thread is not None and self._pid == os.getpid()):
                return
            self._pid = os.getpid()  # a forked child checkpoints with a thread of its own
            name = "schedule-sdk-sqlite-checkpoint"
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._idle)
            self._wake.clear()
            if self._stop.is_set():
                return
            commits = self._commits
            if commits == self._done or not self._waits():
                # quiet, all copied (or light commits only, not yet due): sleep until a commit
                # that needs a checkpoint wakes it
                self._parked = True
                if not self._waits():  # else a commit came in meanwhile
                    self._wake.wait(self.park)
                self._parked = False
                with self._lock:
                    if not self._waits():  # quiet that long: the thread ends (the next commit
                        self._thread = None  # that needs one starts another), so a store never
                        return  # closed leaves none
                self._wake.clear()  # the commit that woke it: a quiet ``idle`` first
                continue
            self._light, self._since = True, time.monotonic()  # the next checkpoint's from here on
            try:
                self._checkpoint()
            except Exception as error:  # the next commit's count tries again; SQLite stays correct
                self._light = False  # tried again after a quiet ``idle``
                logger.debug("WAL checkpoint failed: %s", error)
                continue
            self._done = commits

    def rest(self) -> None:
        """End the thread now, as a quiet spell would (a stopping worker: its stop leaves no thread
        behind); the next commit that needs a checkpoint starts another, and what was not copied
        yet waits for that one (or for SQLite's own, when the last connection closes)."""
        self.close()
        with self._lock:
            if self._thread is not None and not self._thread.is_alive():
                self._thread = None
            self._stop.clear()

    def close(self) -> None:
        """Stop the thread (one last checkpoint is SQLite's, when the last connection closes)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread() and self._pid == os.getpid():
            thread.join(timeout=2)
