"""``ScheduleWorker``: the in-process worker's lifecycle.

``start()`` runs the boot reconciler, then starts the listener pool, the substrate's runner (the
due-time poller, or the RQ worker) and a heartbeat that renews this worker's leases, releases
the expired leases of workers that died, hands over again the entries a dead process left
stranded for longer than the lease (``Reconciler.rescue``) and, with ``retention`` set, purges old
finished jobs. ``stop()`` stops cleanly: in-flight fires get ``stop_timeout`` seconds to finish,
the rest are released for another worker. It installs no signal handlers, so it is safe inside a
threaded web app. Also a context manager::

    with container.worker():
        ...  # jobs fire in this process
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from ..domain.errors import ScheduleError
from ..ports import Clock, JobStore, Runner
from ..reconciler import Reconciler
from ..retention import Purger
from .dispatch import FireDispatcher

logger = logging.getLogger(__name__)


class ScheduleWorker:
    def __init__(
        self,
        *,
        store: JobStore,
        clock: Clock,
        reconciler: Reconciler,
        dispatcher: FireDispatcher,
        runner: Runner,
        lease_seconds: float = 30.0,
        stop_timeout: float = 5.0,
        reconcile_interval: float = 0.0,
        purger: Purger | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self.reconciler = reconciler
        self.dispatcher = dispatcher
        self._runner = runner
        self._lease = lease_seconds
        self._stop_timeout = stop_timeout
        self._reconcile_interval = reconcile_interval
        self._purger = purger
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._heartbeat is not None

    def start(self) -> ScheduleWorker:
        """Reconcile, then start firing jobs in this process. Idempotent."""
        with self._lock:
            if self.running:
                return self
            self.reconciler.run_at_start()
            self._stop.clear()
            self.dispatcher.start()
            self._runner.start()
            self._heartbeat = threading.Thread(target=self._beat, name="schedule-sdk-heartbeat", daemon=True)
            self._heartbeat.start()
            logger.info("worker %s started", self.dispatcher.worker_id)
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop firing; let in-flight fires finish within ``timeout`` (default ``stop_timeout``)
        seconds and release the rest. Idempotent."""
        with self._lock:
            if not self.running:
                return
            self._stop.set()
            self._runner.stop()
            self.dispatcher.stop(self._stop_timeout if timeout is None else timeout)
            assert self._heartbeat is not None
            self._heartbeat.join(timeout=2)
            self._heartbeat = None
            logger.info("worker %s stopped", self.dispatcher.worker_id)

    def __enter__(self) -> ScheduleWorker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _beat(self) -> None:
        interval = max(0.05, min(self._lease / 3, 1.0))
        last_reconcile = time.monotonic()
        while not self._stop.wait(interval):
            try:
                held = self.dispatcher.held_ids()
                if held:
                    until = self._clock.now() + timedelta(seconds=self._lease)
                    self._store.extend_claims(self.dispatcher.worker_id, held, until)
                self.reconciler.release_expired()
                self.reconciler.rescue()
                if self._reconcile_interval and time.monotonic() - last_reconcile >= self._reconcile_interval:
                    last_reconcile = time.monotonic()
                    self.reconciler.run()
                if self._purger is not None:
                    self._purger.tick()  # retention: a time-boxed slice of the purge
            except ScheduleError as error:
                logger.warning("heartbeat failed: %s", error)
