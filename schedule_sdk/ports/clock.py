"""Where time comes from: the clock a process reads and the store's clock claims are made by."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime


class Clock(ABC):
    """Where "now" comes from (a fake one in tests)."""

    @abstractmethod
    def now(self) -> datetime:
        """The current instant, aware UTC."""

    @property
    def real_time(self) -> bool:
        """Whether this clock moves on its own, with real time (a fake one in tests does not):
        only then does a worker claim ahead of the due instant and wait the rest out
        (:func:`claim_horizon`)."""
        return False


class ClaimClock(Clock):
    """The clock claims are made by: the store's clock as this process knows it (see
    :class:`~schedule_sdk.core.store_time.StoreTime`). A row is due when its ``run_at`` has
    passed on the store's clock, whatever this process's own clock says."""

    @abstractmethod
    def claim_now(self) -> datetime | None:
        """An instant known to have passed on the store's clock (its best estimate less the
        estimate's error), or None while this process may not claim: its offset from the store's
        clock is unknown or beyond the bound it is allowed."""
