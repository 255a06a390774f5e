"""``ScheduleContainer``: the composition root (dependency-injector).

Configuration comes from environment variables (see :class:`~schedule_sdk.bootstrap.settings.Settings`) or
from ``container.config.from_dict({...})`` before first use. Any provider can be overridden::

    container = ScheduleContainer()
    container.config.from_dict({"database_url": "postgresql+psycopg://postgres@localhost/app"})
    service = container.schedule_service()      # inject this into app code
    container.listeners().register(my_listeners)  # a module (or object) with @on_event listeners
    with container.worker():                    # boot reconciler, then fire jobs in this process
        ...
    container.shutdown_resources()              # dispose the engine

Nothing connects at import time; providers for the ``rq`` substrate are imported only when the
settings select it. Providers that worker threads reach are thread-safe singletons.

The store may be overridden with any :class:`~schedule_sdk.ports.JobStore`. A component that needs
more than that, a capability of the store (see :mod:`schedule_sdk.ports`), refuses a store that
lacks it as the container builds it, with :class:`~schedule_sdk.domain.errors.StoreLacksCapability`:
``container.worker()`` needs a ``WorkerRegistry`` (dead-worker detection), and also ``Retention``
when the ``retention`` setting is set; ``container.purger()`` needs ``Retention``. Optional
capabilities are used when the store has them (``FireHistory``: fires are recorded;
``JoinableStore``: ``connection=`` is accepted).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from schedule_sdk.adapters.clock import SystemClock
from schedule_sdk.adapters.metrics import InMemoryMetrics
from schedule_sdk.adapters.publishers.blinker import BlinkerEventPublisher
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.declared import SQLAlchemyDeclaredRows
from schedule_sdk.adapters.sql.engine import make_async_engine, make_engine, session_name
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.bootstrap.injector import containers, providers
from schedule_sdk.bootstrap.settings import Settings
from schedule_sdk.bootstrap.tracing import tracing_for
from schedule_sdk.core.declared import DeclaredSchedules, DeclaredSync
from schedule_sdk.core.dispatch import FireDispatcher
from schedule_sdk.core.firing import Firing
from schedule_sdk.core.listeners import ListenerRegistry
from schedule_sdk.core.loop import ListenerLoop
from schedule_sdk.core.reconciler import Reconciler
from schedule_sdk.core.retention import Purger
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.core.store_time import StoreTime
from schedule_sdk.core.unobserved import NoMetrics
from schedule_sdk.core.worker import ScheduleWorker
from schedule_sdk.ports import DeclaredRows, JobStore, provided
from schedule_sdk.substrates.sql.poller import DuePoller
from schedule_sdk.substrates.sql.queue import SQLExecutionQueue

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine


def _lazy(module: str, attribute: str) -> Callable[..., Any]:
    """A factory that imports ``module`` only when called (optional extras stay optional)."""

    def create(*args: Any, **kwargs: Any) -> Any:
        target: Any = importlib.import_module(module)
        for part in attribute.split("."):
            target = getattr(target, part)
        return target(*args, **kwargs)

    create.__qualname__ = f"{module}.{attribute}"
    return create


def _engine(settings: Settings) -> Iterator[Engine]:
    engine = make_engine(
        settings.database_url,
        pool_size=settings.pool_size,
        pre_ping=settings.pool_pre_ping,
        pooler=settings.database_pooler,
        application_name=session_name(settings.worker_id),
    )
    if settings.auto_migrate:
        schema.upgrade(engine)
    yield engine
    engine.dispose()


def _prometheus(store: Any, clock: Any, store_time: StoreTime) -> Any:
    """Prometheus metrics whose pending/backlog gauges are read from the store at each scrape, and
    whose clock gauges show this process's last measured offset from the store's clock."""
    from schedule_sdk.adapters.metrics import PrometheusMetrics

    metrics = PrometheusMetrics()
    metrics.watch_backlog(lambda: (now := clock.now(), store.backlog(now)))
    metrics.watch_concurrency(lambda: store.concurrency_load(clock.now()))

    def clock_reading() -> tuple[float, float] | None:
        reading = store_time.reading
        return None if reading is None else (reading.offset, reading.error)

    metrics.watch_clock(clock_reading)
    return metrics


def _async_engine(settings: Settings, migrated: Engine) -> Iterator[AsyncEngine]:
    """The asyncio engine on the same database (``migrated``: the sync engine ran the migrations).
    ``shutdown_resources`` drops its pool; close it cleanly with ``await engine.dispose()`` while
    its loop still runs (e.g. at the end of a FastAPI lifespan)."""
    engine = make_async_engine(
        settings.database_url,
        pool_size=settings.pool_size,
        pre_ping=settings.pool_pre_ping,
        pooler=settings.database_pooler,
        application_name=session_name(settings.worker_id),
    )
    yield engine
    engine.sync_engine.dispose(close=False)


def _sqlite_calls(settings: Settings, store: SQLAlchemyJobStore, service: ScheduleService) -> Iterator[Any]:
    """SQLite: how the awaitable service runs calls (inline on the ``sql`` substrate when nothing
    can wait, else on store threads); None on PostgreSQL."""
    if store.engine.dialect.name != "sqlite":
        yield None
        return
    from schedule_sdk.aio.sqlite_calls import SQLiteCalls

    calls = SQLiteCalls(service=service, store=store, inline=settings.execution_substrate == "sql")
    yield calls
    calls.close()


def _worker_purger(retention: object, purger: Callable[[], Purger]) -> Purger | None:
    """The worker's purger: built (so the store must have ``Retention``) when the ``retention``
    setting is set, else None (the worker purges nothing)."""
    return None if retention is None else purger()


def _declared_rows(store: JobStore, engine: Callable[[], Engine]) -> DeclaredRows:
    """Where the declared schedules are kept: the store itself when it keeps them (the in-memory
    store), else the ``schedule_declared`` table on the store's database."""
    return provided(store, DeclaredRows) or SQLAlchemyDeclaredRows(engine())


def _sync_at_start(schedules: DeclaredSchedules, sync: Callable[[], DeclaredSync]) -> Callable[[], object]:
    """The worker's start hook: apply the declared schedules (the sync, and its store, are only
    built when something is declared)."""

    def run() -> object:
        return sync().apply() if len(schedules) else None

    return run


def _listener_loop() -> Iterator[ListenerLoop]:
    loop = ListenerLoop()
    yield loop
    loop.close()


class ScheduleContainer(containers.DeclarativeContainer):
    config = providers.Configuration()
    settings = providers.ThreadSafeSingleton(Settings.load, config)
    clock = providers.ThreadSafeSingleton(SystemClock)

    engine = providers.Resource(_engine, settings=settings)
    store = providers.ThreadSafeSingleton(
        SQLAlchemyJobStore, engine=engine, listen_url=settings.provided.database_listen_url
    )
    #: The store's clock as this process knows it (``clock`` corrected by its measured offset):
    #: what the worker's claims, leases, beats and lateness figures read.
    store_time = providers.ThreadSafeSingleton(
        StoreTime, clock=clock, store=store, max_offset=settings.provided.max_clock_offset
    )

    # One metrics port for jobs and the timer (override it to bring your own).
    metrics = providers.Selector(
        settings.provided.metrics,
        none=providers.ThreadSafeSingleton(NoMetrics),
        memory=providers.ThreadSafeSingleton(InMemoryMetrics),
        prometheus=providers.ThreadSafeSingleton(
            _prometheus, store=store, clock=clock, store_time=store_time
        ),
    )

    #: Spans for fires in the trace that scheduled the job (override it to pass your
    #: own ``OtelTracing(tracer_provider=...)``).
    tracing = providers.ThreadSafeSingleton(tracing_for, settings.provided.tracing)

    #: Where ``async def`` listeners run: the app's loop while a worker started from async code
    #: runs, else one long-lived loop of the container's own (closed at ``shutdown_resources``).
    listener_loop = providers.Resource(_listener_loop)
    #: This container's listeners (never shared with another container): the ``@on_event``
    #: functions of ``listener_modules``, plus whatever is registered on it.
    listeners = providers.ThreadSafeSingleton(
        ListenerRegistry.of_modules, settings.provided.listener_modules, loop=listener_loop
    )
    publisher = providers.Selector(
        settings.provided.events,
        local=providers.ThreadSafeSingleton(BlinkerEventPublisher, registry=listeners),
        redis=providers.ThreadSafeSingleton(
            _lazy("schedule_sdk.adapters.publishers.redis", "RedisEventPublisher"),
            registry=listeners,
            redis_url=settings.provided.redis_url,
        ),
    )

    sql_queue = providers.ThreadSafeSingleton(SQLExecutionQueue)
    queue = providers.Selector(
        settings.provided.execution_substrate,
        sql=sql_queue,
        rq=providers.ThreadSafeSingleton(
            _lazy("schedule_sdk.bootstrap.substrates", "rq_queue"),
            settings=settings,
            metrics=metrics,
        ),
    )

    #: The health check's look at Redis: ping, and the eviction policy (when ``redis_url`` is set).
    redis_probe = providers.Factory(
        _lazy("schedule_sdk.bootstrap.substrates", "redis_probe"), settings=settings
    )

    schedule_service = providers.ThreadSafeSingleton(
        ScheduleService,
        store=store,
        queue=queue,
        clock=clock,
        max_payload_bytes=settings.provided.max_payload_bytes,
        metrics=metrics,
        tracing=tracing,
    )

    async_engine = providers.Resource(_async_engine, settings=settings, migrated=engine)
    async_queue = providers.Selector(
        settings.provided.execution_substrate,
        sql=sql_queue,
        rq=providers.ThreadSafeSingleton(
            _lazy("schedule_sdk.bootstrap.substrates", "rq_async_queue"),
            settings=settings,
        ),
    )
    #: SQLite: how the awaitable service runs a call without ``connection=`` (None on PostgreSQL).
    sqlite_calls = providers.Resource(_sqlite_calls, settings=settings, store=store, service=schedule_service)
    #: The awaitable service (same methods and guarantees): PostgreSQL on SQLAlchemy's asyncio
    #: engine; SQLite through ``sqlite_calls``.
    async_schedule_service = providers.ThreadSafeSingleton(
        _lazy("schedule_sdk.aio.service", "AsyncScheduleService"),
        engine=async_engine,
        queue=async_queue,
        clock=clock,
        max_payload_bytes=settings.provided.max_payload_bytes,
        metrics=metrics,
        tracing=tracing,
        sqlite=sqlite_calls,
    )

    #: The schedules declared in code (``@cron``, ``@every``, ``@after``) this container syncs:
    #: those of ``listener_modules``, plus whatever is registered on it.
    declared_schedules = providers.ThreadSafeSingleton(
        DeclaredSchedules.of_modules, settings.provided.listener_modules, listeners=listeners
    )
    #: Where they are kept (see :func:`_declared_rows`).
    declared_rows = providers.ThreadSafeSingleton(_declared_rows, store=store, engine=engine.provider)
    #: ``plan()`` / ``apply()`` of the declared schedules (a worker applies it when it starts).
    declared_sync = providers.ThreadSafeSingleton(
        DeclaredSync,
        store=store,
        rows=declared_rows,
        queue=queue,
        clock=clock,
        schedules=declared_schedules,
        version=settings.provided.declared_version,
        prune=settings.provided.declared_prune,
    )

    firing = providers.ThreadSafeSingleton(
        Firing,
        store=store,
        queue=queue,
        publisher=publisher,
        clock=store_time,
        metrics=metrics,
        tracing=tracing,
        unheard_fails=settings.provided.unheard_fails,
        time_limits=settings.provided.time_limit_defaults,
    )
    dispatcher = providers.ThreadSafeSingleton(
        FireDispatcher,
        firing=firing,
        store=store,
        worker_id=settings.provided.worker_id,
        concurrency=settings.provided.worker_concurrency,
        max_in_flight=settings.provided.max_in_flight,
        max_stuck=settings.provided.max_stuck_listeners,
    )
    runner = providers.Selector(
        settings.provided.execution_substrate,
        sql=providers.ThreadSafeSingleton(
            DuePoller,
            store=store,
            queue=sql_queue,
            dispatcher=dispatcher,
            clock=store_time,
            lease_seconds=settings.provided.lease_seconds,
            batch_size=settings.provided.claim_batch_size,
            poll_interval=settings.provided.poll_interval,
        ),
        rq=providers.ThreadSafeSingleton(
            _lazy("schedule_sdk.bootstrap.substrates", "rq_runner"),
            settings=settings,
            queue=queue,
            store=store,
            dispatcher=dispatcher,
            clock=store_time,
        ),
    )
    #: What the RQ job function runs in a stock ``rq worker`` process (see ``entrypoints/rq_job.py``).
    rq_job_runtime = providers.ThreadSafeSingleton(
        _lazy("schedule_sdk.bootstrap.substrates", "rq_job_runtime"),
        settings=settings,
        queue=queue,
        firing=firing,
        store=store,
        clock=store_time,
    )
    reconciler = providers.ThreadSafeSingleton(
        Reconciler,
        store=store,
        queue=queue,
        clock=store_time,
        lease_seconds=settings.provided.lease_seconds,
        metrics=metrics,
    )
    purger = providers.ThreadSafeSingleton(
        Purger, store=store, clock=store_time, retention=settings.provided.retention_period
    )
    worker = providers.ThreadSafeSingleton(
        ScheduleWorker,
        store=store,
        clock=store_time,
        reconciler=reconciler,
        dispatcher=dispatcher,
        runner=runner,
        lease_seconds=settings.provided.lease_seconds,
        stop_timeout=settings.provided.stop_timeout,
        reconcile_interval=settings.provided.reconcile_interval,
        purger=providers.Callable(
            _worker_purger, retention=settings.provided.retention_period, purger=purger.provider
        ),
        dead_after=settings.provided.dead_after,
        substrate=settings.provided.execution_substrate,
        listener_loop=listeners.provided.loop,
        on_start=providers.Callable(
            _sync_at_start, schedules=declared_schedules, sync=declared_sync.provider
        ),
        listeners=listeners,
    )
