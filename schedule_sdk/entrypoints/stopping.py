"""``StopSignals``: SIGTERM and SIGINT as a stop request that a program's main thread waits for.

A signal handler runs in the main thread, between two of its bytecodes, wherever that thread is.
A handler that sets a ``threading.Event`` takes the event's lock; if the main thread was itself
inside that event's ``wait`` holding the same lock at that instant (it takes it briefly on every
timed wake), the handler waits for a lock its own thread holds, and the process never stops: a
SIGTERM'd worker hangs until it is killed. So the handler here takes no lock: it sets a flag and
writes one byte to a pipe, and the main thread waits on that pipe with ``select``, which the
signal interrupts and the byte then ends at once.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterable
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: The longest the main thread waits without running Python code (seconds): a stop signal
#: delivered to another thread is handled within that.
SLICE = 0.5


class StopSignals:
    """Install with ``with StopSignals() as stop:``; ``stop.wait()`` returns once one of
    ``signals`` arrived (the previous handlers are restored on exit). Main thread only, as any
    signal handler."""

    def __init__(self, signals: Iterable[signal.Signals] = STOP_SIGNALS) -> None:
        self.signals = tuple(signals)
        self.received: signal.Signals | None = None  #: the first stop signal, once one arrived
        self._previous: dict[signal.Signals, Any] = {}
        self._read_fd = self._write_fd = -1

    @property
    def requested(self) -> bool:
        """Whether a stop signal arrived."""
        return self.received is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop signal arrived (True) or ``timeout`` seconds passed (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.requested:
            left = SLICE if deadline is None else min(SLICE, deadline - time.monotonic())
            if left <= 0:
                break
            select.select([self._read_fd], [], [], left)
        return self.requested

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        # no lock here: see the module's docstring
        if self.received is None:
            self.received = signal.Signals(signum)
        with contextlib.suppress(OSError):  # a full pipe already wakes the waiter
            os.write(self._write_fd, b"\0")

    def __enter__(self) -> StopSignals:
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        os.close(self._read_fd)
        os.close(self._write_fd)
