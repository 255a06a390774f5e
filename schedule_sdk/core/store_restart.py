"""``StoreRestarts``: what a live worker repairs once its store answers again after a restart.

A PostgreSQL store acknowledges claims and outcomes without waiting for their WAL flush, so a
crash of the server (or ``pg_ctl restart -m immediate``) may lose the last ones:

- a lost *claim* leaves its row pending at the occurrence and attempt the worker took. On the
  ``sql`` substrate the due-time poller claims it again; on ``rq`` the consumer had already
  consumed its queue entry, so nothing would fire it before a reconcile: for
  :data:`REPAIR_WINDOW` seconds the worker hands over again, at each beat, the pending rows due soon
  whose entries are missing (the reconcile's due-first pass,
  :meth:`~schedule_sdk.core.reconciler.Reconciler.hand_over_due`) and those a consumer popped
  more than :data:`~schedule_sdk.core.liveness.DEAD_RESCUE_AGE` seconds ago whose rows are still
  pending (:meth:`~schedule_sdk.core.reconciler.Reconciler.rescue`; a consumer clears its mark of
  a popped entry up to a second after the claim, and until then the entry does not count as
  missing);
- a lost *outcome* leaves its row active, claimed by this worker, which no longer holds the fire
  and would not renew its lease: the worker releases its claims that are not among its fires in
  flight, so they fire again at once instead of when the lease ends (at least once: a fire whose
  outcome a crash lost runs again).

When: every maintenance beat reads the store's incarnation
(:meth:`~schedule_sdk.ports.RestartRepair.store_incarnation`, PostgreSQL's postmaster start
time); a change, or a heartbeat that failed since the last look (:meth:`StoreRestarts.outage`:
an outage of unknown cause), starts the repair once the store answers. A claim of this worker
that is not in flight is released only when it still is so at the next beat, at the same
occurrence and attempt: a claim just committed and not yet handed to the dispatcher is left alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection

from schedule_sdk.core.liveness import DEAD_RESCUE_AGE
from schedule_sdk.core.reconciler import Reconciler
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.ports import OccurrenceRef, RestartRepair

logger = logging.getLogger(__name__)

#: Seconds after a store restart (or an outage) during which each beat hands over again the due
#: entries its lost claims left missing.
REPAIR_WINDOW = 5.0


class StoreRestarts:
    """One worker's look for a restarted store, and the repair after one."""

    def __init__(
        self,
        *,
        repair: RestartRepair | None,
        reconciler: Reconciler,
        worker_id: str,
        in_flight: Callable[[], Collection[str]],
    ) -> None:
        self._repair = repair
        self._reconciler = reconciler
        self._worker_id = worker_id
        self._in_flight = in_flight
        self._incarnation: str | None = None
        self._suspect = False  #: the store may have lost commits: repair at the next look
        self._orphans: set[OccurrenceRef] = set()  #: claims not in flight at the last repair
        self._repair_until = 0.0  #: monotonic: hand over missing due entries at each look until then

    def outage(self) -> None:
        """A store call failed: repair at the next look that the store answers."""
        self._suspect = True

    def look(self) -> int:
        """Read the store's incarnation; repair when it changed or after an outage. Return how
        many rows were released or handed over again.

        :raises ScheduleError: the store (or the queue) did not answer: the repair is tried again.
        """
        if self._repair is None:  # a store whose commits a restart does not lose
            return 0
        try:
            return self._look(self._repair)
        except ScheduleError:
            self._suspect = True
            raise

    def _look(self, repair: RestartRepair) -> int:
        incarnation = repair.store_incarnation()
        if incarnation != self._incarnation:
            if self._incarnation is not None:
                logger.warning("the store restarted: releasing and handing over what it may have lost")
                self._suspect = True
            self._incarnation = incarnation
        done = 0
        if self._orphans:
            orphans, self._orphans = self._orphans, set()
            held = set(self._in_flight())
            claims = repair.claims_of(self._worker_id)
            still = [c for c in claims if c in orphans and c[0] not in held]
            done += self._reconciler.release_own(repair, self._worker_id, still)
        if self._suspect:
            held = set(self._in_flight())
            self._orphans = {c for c in repair.claims_of(self._worker_id) if c[0] not in held}
            self._repair_until = time.monotonic() + REPAIR_WINDOW
            self._suspect = False
        if self._reconciler.holds_entries and time.monotonic() < self._repair_until:
            handed = self._reconciler.hand_over_due() + self._reconciler.rescue(DEAD_RESCUE_AGE)
            if handed:
                logger.warning("handed over again %d due entries whose claims the store lost", handed)
            done += handed
        return done
