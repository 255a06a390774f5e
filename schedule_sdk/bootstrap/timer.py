"""``Timer``: the timer assembled on the Schedule core, in-process or as the timer service.

::

    settings = TimerSettings.load({"db_path": "timers.db", "broker_url": "inprocess"})
    with Timer(settings) as timer:
        timer.bus.subscribe(lambda envelope: ...)          # in-process DueTimeReached
        timer.schedule(ScheduleTimer(tenant_id="t1", service_call_id="sc1", due_at=when))
        timer.queries.get("t1", "sc1")                      # when will it fire, and did it?

The timer's job store must be fired only by the timer's own worker: give it its own database (or
a database where no other schedule_sdk worker runs), or another worker would take its jobs.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy.engine import Engine

from schedule_sdk.adapters.brokers.inprocess import InProcessBus, InProcessCommandSource
from schedule_sdk.adapters.metrics import InMemoryMetrics
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.timers import SQLAlchemyTimerStore
from schedule_sdk.bootstrap.container import ScheduleContainer
from schedule_sdk.bootstrap.injector import containers, providers
from schedule_sdk.bootstrap.settings import Settings
from schedule_sdk.bootstrap.timer_settings import TimerSettings
from schedule_sdk.core.listeners import ListenerRegistry
from schedule_sdk.core.timers import TimerQueries, TimerService
from schedule_sdk.core.worker import ScheduleWorker
from schedule_sdk.domain.errors import ScheduleError
from schedule_sdk.domain.events import schedule_arrived_event_name
from schedule_sdk.domain.jobs import Backoff, RetryPolicy
from schedule_sdk.domain.timers import TIMER_TOPIC, ScheduleTimer, TimerOutcome
from schedule_sdk.ports import CommandSource, MessageBus, Metrics, TimerStore

logger = logging.getLogger(__name__)


def _engine(settings: TimerSettings) -> Engine:
    engine = make_engine(settings.database_url, pooler=settings.database_pooler)
    schema.upgrade(engine, attributes={"timer_service_calls_fk": settings.service_calls_fk})
    return engine


def _core_settings(s: TimerSettings) -> Settings:
    """The core's settings for the timer: its own job store, fired by its own sql worker."""
    return Settings.load(
        {
            "database_url": s.database_url,
            "database_pooler": s.database_pooler,
            "database_listen_url": s.database_listen_url,
            "substrate": "sql",
            "events": "local",
            "auto_migrate": False,
            "claim_batch_size": s.batch_size,
            "poll_interval": s.polling_interval_ms / 1000,
            "lease_seconds": s.lease_seconds,
            "worker_concurrency": s.concurrency,
        }
    )


def _nats_loop(settings: TimerSettings) -> Any:
    """The NATS connection loop (None for the in-process broker)."""
    if settings.in_process:
        return None
    from schedule_sdk.adapters.brokers.nats import NatsLoop

    return NatsLoop(settings.broker_url)


def _bus(settings: TimerSettings, nats: Any) -> MessageBus:
    if nats is None:
        return InProcessBus()
    from schedule_sdk.adapters.brokers.nats import JetStreamBus

    s = settings
    return JetStreamBus(nats, stream=s.event_stream, subject=s.event_subject, timeout=s.publish_timeout)


def _source(settings: TimerSettings, nats: Any) -> CommandSource:
    if nats is None:
        return InProcessCommandSource()
    from schedule_sdk.adapters.brokers.nats import JetStreamCommandSource

    s = settings
    return JetStreamCommandSource(
        nats,
        stream=s.command_stream,
        subject=s.command_subject,
        durable=s.consumer,
        batch=s.intake_batch,
        dead_letter_subject=s.dead_letter_subject,
        ack_wait=s.ack_wait,
        max_deliver=s.max_deliver,
    )


def _retry(settings: TimerSettings) -> RetryPolicy:
    return RetryPolicy(attempts=settings.retry_attempts, backoff=Backoff(delay_ms=settings.retry_delay_ms))


class TimerContainer(containers.DeclarativeContainer):
    """The timer's composition root: the Schedule core (a nested :class:`ScheduleContainer`,
    ``core``) on the timer's engine and metrics, plus the timer store, the broker adapters and the
    :class:`TimerService`. Override ``settings`` (a :class:`TimerSettings`) before first use, and
    any provider (``bus``, ``source``, ``timers``, ``metrics``, ``core.clock`` ...) as needed."""

    settings = providers.ThreadSafeSingleton(TimerSettings.load)
    engine = providers.ThreadSafeSingleton(_engine, settings)
    #: One metrics port: the core counts fires in the timer's metrics.
    metrics = providers.ThreadSafeSingleton(InMemoryMetrics)
    core = providers.Container(
        ScheduleContainer,
        settings=providers.ThreadSafeSingleton(_core_settings, settings),
        engine=engine,
        metrics=metrics,
    )

    nats = providers.ThreadSafeSingleton(_nats_loop, settings)
    bus = providers.ThreadSafeSingleton(_bus, settings, nats)
    source = providers.ThreadSafeSingleton(_source, settings, nats)
    timers = providers.ThreadSafeSingleton(SQLAlchemyTimerStore, engine)
    service = providers.ThreadSafeSingleton(
        TimerService,
        jobs=core.store,
        queue=core.queue,
        timers=timers,
        bus=bus,
        clock=core.clock,
        metrics=metrics,
        retry=providers.Callable(_retry, settings),
    )
    queries = providers.ThreadSafeSingleton(TimerQueries, timers)


class Timer:
    """The timer, built from a :class:`TimerContainer` (``timer.container``)."""

    def __init__(
        self,
        settings: TimerSettings | None = None,
        *,
        metrics: Metrics | None = None,
        bus: MessageBus | None = None,
        source: CommandSource | None = None,
    ) -> None:
        self.container = c = TimerContainer()
        c.settings.override(providers.Object(settings or TimerSettings.load()))
        for provider, given in ((c.metrics, metrics), (c.bus, bus), (c.source, source)):
            if given is not None:
                provider.override(providers.Object(given))
        self.settings: TimerSettings = c.settings()
        self.metrics: Metrics = c.metrics()
        self.engine: Engine = c.engine()
        self.bus: MessageBus = c.bus()
        self.source: CommandSource = c.source()
        self._nats: Any = c.nats() if bus is None or source is None else None
        self.registry: ListenerRegistry = c.core.listeners()
        self.timers: TimerStore = c.timers()
        self.service: TimerService = c.service()
        self.queries: TimerQueries = c.queries()
        self.registry.connect(schedule_arrived_event_name(TIMER_TOPIC), self.service.on_due)
        self._stop = threading.Event()
        self._healer: threading.Thread | None = None

    @property
    def worker(self) -> ScheduleWorker:
        worker: ScheduleWorker = self.container.core.worker()
        return worker

    def schedule(self, command: ScheduleTimer) -> TimerOutcome:
        """Take a ScheduleTimer command by direct call (persisted when this returns)."""
        return self.service.handle(command)

    def start(self) -> Timer:
        """Connect, heal, then fire due timers and take commands."""
        if self._nats is not None:
            s = self.settings
            self._nats.connect()
            if s.create_streams:
                self._nats.ensure_stream(s.command_stream, [s.command_subject])
                self._nats.ensure_stream(s.event_stream, [s.event_subject])
        self.service.heal()
        self.worker.start()
        self.source.start(self.service)
        self._stop.clear()
        if self.settings.heal_interval > 0:
            self._healer = threading.Thread(
                target=self._heal_loop, name="schedule-sdk-timer-heal", daemon=True
            )
            self._healer.start()
        logger.info(
            "timer started (broker %s)", "in-process" if self._nats is None else self.settings.broker_url
        )
        return self

    def stop(self) -> None:
        """Stop taking commands, let in-flight fires finish, and release everything."""
        self._stop.set()
        self.source.stop()
        self.worker.stop()
        if self._healer is not None:
            self._healer.join(timeout=5)
            self._healer = None

    def close(self) -> None:
        self.stop()
        self.bus.close()
        if self._nats is not None:
            self._nats.close()
        self.engine.dispose()

    def __enter__(self) -> Timer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _heal_loop(self) -> None:
        while not self._stop.wait(self.settings.heal_interval):
            try:
                self.service.heal()
            except ScheduleError as error:
                logger.warning("healing timers failed: %s", error)
