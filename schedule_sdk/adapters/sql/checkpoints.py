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
committed: the log stays about as short as SQLite's own policy keeps it. Once everything committed
is checkpointed and writes stay quiet, the thread ends; the next commit starts another.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)


class Checkpointer:
    """Runs ``checkpoint`` on a thread of its own after every ``every`` commits (counted with
    :meth:`committed`), and ``idle`` seconds after the last commit not yet checkpointed."""

    def __init__(self, checkpoint: Callable[[], None], *, every: int = 100, idle: float = 0.5) -> None:
        self._checkpoint = checkpoint
        self.every = every
        self._idle = idle
        self._commits = 0  # counted by the writers (under the store's writer lock)
        self._done = 0  # the count at the last checkpoint
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def committed(self) -> None:
        """A writer committed (cheap: called after every write transaction)."""
        self._commits += 1  # before the thread check: a thread ending sees it, or a new one starts
        if self._thread is None or self._pid != os.getpid():
            self._start()
        if self._commits - self._done >= self.every:
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
        while not self._stop.is_set():
            self._wake.wait(self._idle)
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                commits = self._commits
                if commits == self._done:  # quiet, all copied: the thread ends (the next commit
                    self._thread = None  # starts another), so a store never closed leaves none
                    return
            try:
                self._checkpoint()
            except Exception as error:  # the next commit's count tries again; SQLite stays correct
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
