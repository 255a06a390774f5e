"""UUIDv7 identifiers (RFC 9562): time-ordered, so ids sort in creation order."""

from __future__ import annotations

import os
import re
import threading
import time
import uuid

#: The text of a job id (a UUID, as :func:`new_id` makes them; any case).
ID_PATTERN = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

_lock = threading.Lock()
_last = 0


def uuid7() -> uuid.UUID:
    """A new UUIDv7, strictly increasing within this process.

    48 bits of Unix milliseconds, then 12 bits of sub-millisecond time (RFC 9562 method 3),
    then 62 random bits. Within one process a clash of the 60 time bits is broken by bumping
    them by one tick, so ids made here sort in the order they were made.
    """
    global _last
    with _lock:
        ns = time.time_ns()
        ticks = (ns // 1_000_000) << 12 | ((ns % 1_000_000) * 4096 // 1_000_000)
        if ticks <= _last:
            ticks = _last + 1
        _last = ticks
    ms, sub = ticks >> 12, ticks & 0xFFF
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (sub << 64) | (0b10 << 62) | rand
    return uuid.UUID(int=value)


def new_id() -> str:
    """A new UUIDv7 as its canonical text."""
    return str(uuid7())
