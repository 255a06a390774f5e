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

from dependency_injector import providers

from ..adapters.brokers.inprocess import InProcessBus, InProcessCommandSource
from ..adapters.metrics import InMemoryMetrics
from ..adapters.stores import schema
from ..adapters.stores.engine import make_engine
from ..adapters.stores.sqlalchemy_timers import SQLAlchemyTimerStore
from ..container import ScheduleContainer
from ..domain.errors import ScheduleError
from ..domain.events import schedule_arrived_event_name
from ..domain.jobs import Backoff, RetryPolicy
from ..listeners import ListenerRegistry
from ..runtimes.worker import ScheduleWorker
from .domain import TIMER_TOPIC, ScheduleTimer, TimerOutcome
from .ports import CommandSource, MessageBus, Metrics
from .service import TimerQueries, TimerService
from .settings import TimerSettings

logger = logging.getLogger(__name__)


class Timer:
    def __init__(
        self,
        settings: TimerSettings | None = None,
        *,
        metrics: Metrics | None = None,
        bus: MessageBus | None = None,
        source: CommandSource | None = None,
    ) -> None:
        self.settings = s = settings or TimerSettings.load()
        self.metrics = metrics or InMemoryMetrics()
        self.engine = make_engine(s.database_url)
        schema.upgrade(self.engine, attributes={"timer_service_calls_fk": s.service_calls_fk})
        self._nats: Any = None
        if bus is None or source is None:
            default_bus, default_source = self._adapters()
            bus, source = bus or default_bus, source or default_source
        self.bus, self.source = bus, source
        self.container = _container(s, self.engine)
        self.container.metrics.override(providers.Object(self.metrics))  # one port: the core counts fires
        self.registry: ListenerRegistry = self.container.listeners()
        self.timers = SQLAlchemyTimerStore(self.engine)
        self.service = TimerService(
            jobs=self.container.store(),
            queue=self.container.queue(),
            timers=self.timers,
            bus=bus,
            clock=self.container.clock(),
            metrics=self.metrics,
            retry=RetryPolicy(attempts=s.retry_attempts, backoff=Backoff(delay_ms=s.retry_delay_ms)),
        )
        self.queries = TimerQueries(self.timers)
        self.registry.connect(schedule_arrived_event_name(TIMER_TOPIC), self.service.on_due)
        self._stop = threading.Event()
        self._healer: threading.Thread | None = None

    def _adapters(self) -> tuple[MessageBus, CommandSource]:
        s = self.settings
        if s.in_process:
            return InProcessBus(), InProcessCommandSource()
        from ..adapters.brokers.nats import JetStreamBus, JetStreamCommandSource, NatsLoop

        self._nats = nats_loop = NatsLoop(s.broker_url)
        bus = JetStreamBus(
            nats_loop, stream=s.event_stream, subject=s.event_subject, timeout=s.publish_timeout
        )
        source = JetStreamCommandSource(
            nats_loop,
            stream=s.command_stream,
            subject=s.command_subject,
            durable=s.consumer,
            batch=s.intake_batch,
            dead_letter_subject=s.dead_letter_subject,
        )
        return bus, source

    @property
    def worker(self) -> ScheduleWorker:
        worker: ScheduleWorker = self.container.worker()
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


def _container(s: TimerSettings, engine: Any) -> ScheduleContainer:
    container = ScheduleContainer()
    container.config.from_dict(
        {
            "database_url": s.database_url,
            "substrate": "sql",
            "events": "local",
            "auto_migrate": False,
            "claim_batch_size": s.batch_size,
            "poll_interval": s.polling_interval_ms / 1000,
            "lease_seconds": s.lease_seconds,
            "worker_concurrency": s.concurrency,
        }
    )
    container.engine.override(providers.Object(engine))
    return container
