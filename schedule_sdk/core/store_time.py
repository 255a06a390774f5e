"""``StoreTime``: the store's clock as this process knows it, the clock every claim is made by.

A row is due when its ``run_at`` has passed on the *store's* clock: the one clock every worker
shares. A worker's own clock may run ahead of it or behind it (hosts' clocks disagree by
milliseconds to seconds); a worker claiming by its own clock would fire early by as much as its
clock runs ahead. So a worker measures its offset from the store's clock, at start and with each
heartbeat (:meth:`StoreTime.measure`)::

    start = monotonic; local = local clock; store = WorkerRegistry.store_clock(); end = monotonic
    offset = store - (local + (end - start) / 2)        error = (end - start) / 2

The store read its clock after the local read and before ``end``, both within [start, end], so the
store's clock is within ``error`` of ``local + offset``. ``now()`` is the best estimate (``local +
offset``: lateness, leases, heartbeats, misfire checks); ``claim_now()`` is the earliest the
store's clock can be (``local + offset - error``), so a claim by it is never early. ``now()``
never reads earlier than a ``claim_now()`` it gave out plus the time elapsed since (on a real-time
clock, for ``refresh_after`` seconds): a new measurement may lower the offset by up to its error,
and a fire held until its ``run_at`` by ``claim_now()`` and stamped by ``now()`` just after it
must not read as early. Each
measurement makes :data:`SAMPLES` round trips back to back and keeps the one with the smallest
error: on a busy process a thread switch inside one round trip would otherwise widen every
claim's margin (and delay every fire by it) until the next measurement.
``claim_now()`` is None, and the process claims nothing, while the offset is unknown (never
measured, or the last measurement is older than ``refresh_after`` seconds and a new one fails) or
beyond ``max_offset``: a clock that far off is not kept in step, and a step of it between two
measurements would move every claim by the step until the next one.

On a store without a clock of its own (SQLite, whose clock is the clock of the machine its
processes share, and the in-memory store) the offset is 0 and the error 0, by definition.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.ports import ClaimClock, Clock, JobStore, WorkerRegistry, provided

logger = logging.getLogger(__name__)

#: Seconds a measurement is used for without a new one (a worker's heartbeat measures every
#: second at most; a process without one, a stock ``rq worker``, measures when it claims).
REFRESH_AFTER = 5.0
#: Round trips per measurement; the one with the smallest error is kept.
SAMPLES = 3


@dataclass(frozen=True, slots=True)
class ClockReading:
    """One measurement: seconds to add to the local clock to read the store's (``offset``), the
    bound of its error (half the round trip), and when it was made (``time.monotonic()``)."""

    offset: float
    error: float
    taken: float


class StoreTime(ClaimClock):
    """``clock`` (this process's own) corrected by its measured offset from ``store``'s clock."""

    def __init__(
        self,
        *,
        clock: Clock,
        store: JobStore,
        max_offset: float = 5.0,
        refresh_after: float = REFRESH_AFTER,
    ) -> None:
        self._clock = clock
        self._registry = provided(store, WorkerRegistry)
        self.max_offset = max_offset
        self._refresh_after = refresh_after
        self._reading: ClockReading | None = None
        self._measuring = threading.Lock()
        self._refusing = False
        #: The last ``claim_now()`` given out and ``time.monotonic()`` just after it.
        self._vouched: tuple[datetime, float] | None = None

    @property
    def reading(self) -> ClockReading | None:
        """The last measurement (None before the first)."""
        return self._reading

    def measure(self) -> ClockReading:
        """Measure the offset from the store's clock now (one round trip) and use it from now on.

        :raises StoreUnavailable: the store did not answer (the last reading stands until it ages).
        """
        with self._measuring:
            reading = self._sample(self._registry) if self._registry is not None else None
            if reading is None:
                reading = ClockReading(0.0, 0.0, time.monotonic())
            self._reading = reading
        self._judge(reading)
        return reading

    def _sample(self, registry: WorkerRegistry) -> ClockReading | None:
        """The tightest of ``SAMPLES`` round trips to the store's clock (None: it has none).

        Each one alone bounds the offset; a busy process (a thread switch, a pool checkout
        between the reads) widens a round trip, and so every claim's margin, until the next
        measurement, so the narrowest is kept. They are made back to back: none is older than
        the others by more than a round trip."""
        best: ClockReading | None = None
        for _ in range(SAMPLES):
            # The local clock is read after ``start``: the store's read and the local one
            # then both fall within [start, end], whatever thread switch comes between them.
            start = time.monotonic()
            local = self._clock.now()
            store = registry.store_clock()
            end = time.monotonic()
            if store is None:
                return None
            half = (end - start) / 2
            if best is None or half < best.error:
                offset = (store - (local + timedelta(seconds=half))).total_seconds()
                best = ClockReading(offset, half, end)
        return best

    def within_bound(self, reading: ClockReading) -> bool:
        """Whether a process with this reading may claim: its offset, error included, is at most
        ``max_offset`` seconds."""
        return abs(reading.offset) + reading.error <= self.max_offset

    def now(self) -> datetime:
        """The store's clock, best estimate (this process's own clock while never measured), never
        earlier than the last :meth:`claim_now` plus the time elapsed since it (for
        ``refresh_after`` seconds, on a real-time clock)."""
        reading = self._reading
        now = self._clock.now()
        if reading is None:
            return now
        estimate = now + timedelta(seconds=reading.offset)
        vouched = self._vouched
        if vouched is not None and self._clock.real_time:
            elapsed = time.monotonic() - vouched[1]
            if 0 <= elapsed <= self._refresh_after:
                floor = vouched[0] + timedelta(seconds=elapsed)
                if floor > estimate:
                    return floor
        return estimate

    @property
    def real_time(self) -> bool:
        """As the clock it corrects."""
        return self._clock.real_time

    def claim_now(self) -> datetime | None:
        reading = self._reading
        if reading is None or time.monotonic() - reading.taken > self._refresh_after:
            try:
                reading = self.measure()
            except ScheduleError as error:
                logger.warning("cannot measure the offset from the store's clock: %s", error)
                return None
        if not self.within_bound(reading):
            return None
        at = self._clock.now() + timedelta(seconds=reading.offset - reading.error)
        self._vouched = (at, time.monotonic())
        return at

    def _judge(self, reading: ClockReading) -> None:
        """Log when claims stop (and start again) for an offset beyond the bound."""
        refusing = not self.within_bound(reading)
        if refusing and not self._refusing:
            logger.error(
                "this process's clock is %+.3f s (± %.3f s) off the store's clock, beyond the "
                "bound of %.3f s (max_clock_offset): it claims nothing until its clock is in step",
                reading.offset,
                reading.error,
                self.max_offset,
            )
        elif self._refusing and not refusing:
            logger.warning("clock offset %+.3f s is within the bound again: claiming", reading.offset)
        self._refusing = refusing
