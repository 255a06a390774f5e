"""``StopSignals``: SIGTERM and SIGINT as a stop request that a program's main thread waits for.

A signal handler runs in the main thread, between two of its bytecodes, wherever that thread is.
A handler that sets a ``threading.Event`` takes the event's lock; if the main thread was itself
inside that event's ``wait`` holding the same lock at that instant (it takes it briefly on every
timed wake), the handler waits for a lock its own thread holds, and the process never stops: a
SIGTERM'd worker hangs until it is killed. So the handler here takes no lock: it sets a flag and
writes one byte to a pipe, and the main thread waits on that pipe with ``select``, which the
signal interrupts and the byte then ends at once. The pipe is also the interpreter's wake-up fd
(``signal.set_wakeup_fd``), which gets a byte whichever thread the signal is delivered to: the
main thread sleeps without a timeout.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import time
from collections.abc import Iterable
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: The longest the main thread waits without running Python code (seconds) when the wake-up fd
#: could not be set: a stop signal delivered to another thread is handled within that.
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
        self._wakeup: int | None = None  # the wake-up fd before ours, while ours is set

    @property
    def requested(self) -> bool:
        """Whether a stop signal arrived."""
        return self.received is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a stop signal arrived (True) or ``timeout`` seconds passed (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.requested:
            left = None if self._wakeup is not None else SLICE  # the wake-up fd: no timed wakes
            if deadline is not None:
                left = min(left or math.inf, deadline - time.monotonic())
                if left <= 0:
                    break
            if select.select([self._read_fd], [], [], left)[0] and not self.requested:
                self._drain()  # another signal's byte (or the handler's, which runs next)
        return self.requested

    def _drain(self) -> None:
        with contextlib.suppress(OSError):
            os.read(self._read_fd, 512)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        # no lock here: see the module's docstring
        if self.received is None:
            self.received = signal.Signals(signum)
        with contextlib.suppress(OSError):  # a full pipe already wakes the waiter
            os.write(self._write_fd, b"\0")

    def __enter__(self) -> StopSignals:
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        os.set_blocking(self._read_fd, False)
        try:
            previous = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        except ValueError:  # not the main thread: signal.signal below says so
            previous = None
        if previous is not None and previous != -1:  # someone else's (an event loop): theirs
            signal.set_wakeup_fd(previous)
            previous = None
        self._wakeup = previous
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
        if self._wakeup is not None:
            signal.set_wakeup_fd(self._wakeup)
            self._wakeup = None
        os.close(self._read_fd)
        os.close(self._write_fd)
