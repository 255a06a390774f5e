"""``ScheduleWorker``: the in-process worker's lifecycle.

``start()`` measures the process's offset from the store's clock (when its clock is a
:class:`~schedule_sdk.core.store_time.StoreTime`: claims are made by the store's clock, and the
heartbeat measures again at each beat), registers the worker (its row in the worker registry,
with that offset), releases the claims of workers
found dead, runs the boot reconciler, then starts the listener pool, the substrate's runner (the
due-time poller, or the RQ worker), a heartbeat that beats the worker's row and renews its leases
(on a thread of its own, so no maintenance pass delays a beat), and a maintenance thread at the
same pace that releases the claims of workers whose beat stopped for ``dead_after`` seconds (see
:mod:`~schedule_sdk.core.liveness`; on ``rq`` it also takes over a dead worker's pump lock and,
for a few seconds, hands over the entries its consumer had popped) and, as the fallback, expired
leases, hands over again the entries a dead process left stranded for longer than the lease
(``Reconciler.rescue``), reconciles at once when the substrate's server changed or lost its
entries (a Redis failover, a restart, a flush: ``Reconciler.heal_if_moved``), repairs what a
restart of the store lost (its own claims no longer in flight, the entries of lost claims: see
:mod:`~schedule_sdk.core.store_restart`) and, with ``retention`` set, purges old finished jobs.
A starting worker logs a warning for each way the substrate's configuration could lose entries
(a Redis ``maxmemory-policy`` that may evict them). ``stop()`` stops cleanly: in-flight fires
get ``stop_timeout`` seconds to finish, the rest are released at once for another worker, and
the worker's row is deleted; with nothing in flight it returns within a second, every thread it
started ended (each loop's wait ends on the stop: none is waited out), and the store's threads
for its writes ended too (:meth:`~schedule_sdk.ports.JobStore.quiesce`). It installs no signal
handlers, so it is safe inside a threaded web app. Also a context manager::

    with container.worker():
        ...  # jobs fire in this process

From async code (a FastAPI lifespan), start it with ``async with container.worker():`` or
``await worker.start_async()`` / ``await worker.stop_async()``: ``async def`` listeners then run on
the app's own event loop, so the app's async clients, pools and locks work in them. Started from
sync code, they run on one long-lived loop of the SDK's own (see
:class:`~schedule_sdk.core.loop.ListenerLoop`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from schedule_sdk.core.dispatch import FireDispatcher
from schedule_sdk.core.liveness import DEAD_RESCUE_AGE, DEAD_RESCUE_WINDOW, FORGET_AFTER, Liveness
from schedule_sdk.core.loop import ListenerLoop
from schedule_sdk.core.reconciler import Reconciler
from schedule_sdk.core.retention import Purger
from schedule_sdk.core.store_restart import StoreRestarts
from schedule_sdk.core.store_time import StoreTime
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.leases import Lease
from schedule_sdk.ports import (
    Clock,
    JobStore,
    Listeners,
    RestartRepair,
    Runner,
    WorkerRegistry,
    provided,
    require,
)

logger = logging.getLogger(__name__)


class ScheduleWorker:
    def __init__(
        self,
        *,
        store: JobStore,
        clock: Clock,
        reconciler: Reconciler,
        registry: WorkerRegistry | None = None,
        dispatcher: FireDispatcher,
        runner: Runner,
        lease_seconds: float = 30.0,
        stop_timeout: float = 5.0,
        reconcile_interval: float = 0.0,
        purger: Purger | None = None,
        dead_after: float = 10.0,
        substrate: str = "sql",
        listener_loop: ListenerLoop | None = None,
        on_start: Callable[[], object] | None = None,
        listeners: Listeners | None = None,
    ) -> None:
        self._store = store
        #: This process's listeners: a worker that starts with none says so (every fire it takes
        #: would be ``unheard``, unless events are broadcast to instances that have some).
        self._listeners = listeners
        #: Where the worker beats and finds dead peers: ``registry``, else the store, which must
        #: then be a WorkerRegistry (``StoreLacksCapability``): dead-worker detection is not optional.
        self._registry: WorkerRegistry = (
            registry
            if registry is not None
            else require(store, WorkerRegistry, "a worker (dead-worker detection)")
        )
        self._clock = clock
        self.reconciler = reconciler
        self.dispatcher = dispatcher
        self._runner = runner
        self._lease = lease_seconds
        self._stop_timeout = stop_timeout
        self._reconcile_interval = reconcile_interval
        self._purger = purger
        #: Run at start, after the boot reconciler and before the first fire (the container's:
        #: the sync of the schedules declared in code).
        self._on_start = on_start
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._maintenance: threading.Thread | None = None
        self._lock = threading.Lock()
        self._dead_after = dead_after
        self._substrate = substrate
        self.liveness: Liveness | None = None
        #: Where ``async def`` listeners run; the publisher must use the same one.
        self.listener_loop = listener_loop
        if listener_loop is not None:
            dispatcher.on_overdue = listener_loop.abandon
        self._rescue_fast_until = 0.0  # monotonic: hand over a dead consumer's entries until then
        #: After a store restart (or an outage): release this worker's claims it no longer holds,
        #: hand over the due entries the store's lost claims left missing.
        self._restarts = StoreRestarts(
            repair=provided(store, RestartRepair), reconciler=reconciler, worker_id=dispatcher.worker_id,
            in_flight=dispatcher.held_ids,
        )  # fmt: skip

    @property
    def running(self) -> bool:
        return self._heartbeat is not None

    def start(self) -> ScheduleWorker:
        """Reconcile, then start firing jobs in this process. Idempotent."""
        with self._lock:
            if self.running:
                return self
            clock = self._measure_clock()  # before the first beat and the first claim
            self.liveness = Liveness(
                worker_id=self.dispatcher.worker_id,
                substrate=self._substrate,
                dead_after=self._dead_after,
                started_at=self._clock.now(),
            )
            self._registry.beat(self.liveness.row(self._clock.now(), 0, clock=clock))
            self._watch_peers()
            self._restarts.look()  # records the store's incarnation
            self.reconciler.heal_if_moved()  # records the substrate's server; a change heals at once
            self.reconciler.run_at_start()
            self._warn_of_risks()
            if self._on_start is not None:
                self._on_start()
            self._stop.clear()
            self.dispatcher.start()
            try:
                self._runner.start()
            except BaseException:  # e.g. a wake-up path that cannot work: leave nothing running
                self.dispatcher.stop(0)
                self._registry.remove_worker(self.dispatcher.worker_id)
                raise
            self._warm()
            self._heartbeat = threading.Thread(target=self._beat, name="schedule-sdk-heartbeat", daemon=True)
            self._heartbeat.start()
            self._maintenance = threading.Thread(
                target=self._maintain, name="schedule-sdk-maintenance", daemon=True
            )
            self._maintenance.start()
            logger.info("worker %s started", self.dispatcher.worker_id)
            if self._listeners is not None and self._listeners.count() == 0:
                logger.warning(
                    "worker %s started with no @on_event listener: the fires it takes are recorded "
                    "as unheard (give its listener modules: --listeners or SCHEDULE_LISTENER_MODULES)",
                    self.dispatcher.worker_id,
                )
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
            assert self._heartbeat is not None and self._maintenance is not None
            self._heartbeat.join(timeout=2)
            self._maintenance.join(timeout=2)
            self._heartbeat = self._maintenance = None
            try:
                self._registry.remove_worker(self.dispatcher.worker_id)
            except ScheduleError as error:  # the row ages out; peers find no claims to release
                logger.warning("could not deregister worker: %s", error)
            self._store.quiesce()  # last: the writes above may have started the store's threads
            logger.info("worker %s stopped", self.dispatcher.worker_id)

    def __enter__(self) -> ScheduleWorker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _warn_of_risks(self) -> None:
        """Log each way the substrate's configuration could lose entries (a Redis eviction policy
        that may evict them); never fails the start."""
        try:
            risks = self.reconciler.risks()
        except ScheduleError as error:
            logger.warning("could not check the execution substrate's configuration: %s", error)
            return
        for risk in risks:
            logger.warning("worker %s: %s", self.dispatcher.worker_id, risk)

    @property
    def beat_interval(self) -> float:
        """Seconds between heartbeats: a third of the lease, a quarter of ``dead_after``, at most 1."""
        return max(0.05, min(self._lease / 3, self._dead_after / 4, 1.0))

    def _warm(self) -> None:
        """Let the store open what claims use (:meth:`JobStore.warm`), so the first fire does not
        wait for it. After the substrate's start, whose checks name a misconfiguration (a LISTEN
        through a transaction pooler) that a claims session would only meet as a refused
        connection; a failure is logged, and the first claim meets it again."""
        try:
            self._store.warm()
        except ScheduleError as error:
            logger.warning("could not open the claims' session ahead of the first claim: %s", error)

    def _measure_clock(self) -> tuple[float, float] | None:
        """Measure this process's offset from the store's clock (when its clock is a
        :class:`StoreTime`); ``(offset, error)`` in seconds, for the worker's row."""
        if not isinstance(self._clock, StoreTime):
            return None
        reading = self._clock.measure()
        return reading.offset, reading.error

    def _watch_peers(self) -> None:
        """Release the claims of workers found dead; forget long-dead ones."""
        assert self.liveness is not None
        now = self._clock.now()
        workers = self._registry.workers()
        dead, gone = self.liveness.judge(workers, now)
        if dead:
            self.reconciler.release_dead(now - self.liveness.dead_after, gone, registry=self._registry)
            self.liveness.released(dead)
            logger.warning("workers declared dead: %s", ", ".join(x.id for x in dead))
            self._runner.peers_dead([x.id for x in dead])
            self._rescue_fast_until = time.monotonic() + DEAD_RESCUE_WINDOW
        if time.monotonic() < self._rescue_fast_until:
            self.reconciler.rescue(DEAD_RESCUE_AGE)
        if any(x.last_beat < now - timedelta(seconds=FORGET_AFTER) for x in workers):
            self._registry.forget_workers(now - timedelta(seconds=FORGET_AFTER))

    async def start_async(self) -> ScheduleWorker:
        """:meth:`start` from async code: ``async def`` listeners run on the running (the app's)
        event loop. The blocking start-up (reconcile) runs in a thread, so the loop keeps serving."""
        loop = asyncio.get_running_loop()
        if self.listener_loop is not None:
            self.listener_loop.attach(loop)
        try:
            await asyncio.to_thread(self.start)
        except BaseException:
            if self.listener_loop is not None:
                self.listener_loop.detach(loop)
            raise
        return self

    async def stop_async(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 (stop's own)
        """:meth:`stop` from async code. The loop keeps running meanwhile, so in-flight async
        listeners can finish within the timeout; those still running then are cancelled (their
        fires were released for another worker)."""
        await asyncio.to_thread(self.stop, timeout)
        if self.listener_loop is not None:
            self.listener_loop.detach(asyncio.get_running_loop())

    async def __aenter__(self) -> ScheduleWorker:
        return await self.start_async()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop_async()

    def _beat(self) -> None:
        """Beat the worker's row and renew its claims, every ``beat_interval``: nothing else runs
        on this thread, so a long maintenance pass never makes a live worker look dead."""
        assert self.liveness is not None
        while not self._stop.wait(self.beat_interval):
            try:
                held = self.dispatcher.held_ids()
                stuck = self.dispatcher.stuck()
                clock = self._measure_clock()
                self._registry.beat(self.liveness.row(self._clock.now(), len(held), stuck, clock=clock))
                if held:
                    until = Lease(self._lease).until(self._clock.now())
                    self._store.extend_claims(self.dispatcher.worker_id, held, until)
            except ScheduleError as error:
                self._restarts.outage()  # the store may come back having lost commits
                logger.warning("heartbeat failed: %s", error)

    def _maintain(self) -> None:
        """At the heartbeat's pace, on a thread of its own: release the claims of dead peers and
        expired leases, hand over stranded entries, heal a moved substrate, reconcile, purge."""
        last_reconcile = time.monotonic()
        while not self._stop.wait(self.beat_interval):
            try:
                self._watch_peers()
                self.reconciler.release_expired()
                self._restarts.look()
                self.reconciler.rescue()
                if self.reconciler.heal_if_moved():
                    # a failover: for a few seconds, also hand over entries it left mid-step at once
                    self._rescue_fast_until = time.monotonic() + DEAD_RESCUE_WINDOW
                if self._reconcile_interval and time.monotonic() - last_reconcile >= self._reconcile_interval:
                    last_reconcile = time.monotonic()
                    self.reconciler.run()
                if self._purger is not None:
                    self._purger.tick()  # retention: a time-boxed slice of the purge
            except ScheduleError as error:
                logger.warning("maintenance failed: %s", error)
