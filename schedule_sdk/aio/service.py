"""``AsyncScheduleService``: the awaitable ScheduleService, for async apps.

Same methods, specs, errors and guarantees as :class:`~schedule_sdk.core.service.ScheduleService`,
because it *is* that code:

- PostgreSQL: each call takes a connection from SQLAlchemy's asyncio engine
  (``postgresql+psycopg_async``) and runs the service's validation, write order and SQL statements
  in SQLAlchemy's greenlet bridge (``AsyncConnection.run_sync``), so every database and Redis round
  trip is non-blocking I/O on the running loop, not a thread hop.
- SQLite has no non-blocking I/O (its asyncio driver, aiosqlite, is a thread that runs each DB-API
  call: about eight thread hops per ``schedule_at``, which halve its speed). A call without
  ``connection=`` runs inline when nothing can make it wait, else with one hop on a store thread:
  see :class:`~schedule_sdk.aio.sqlite_calls.SQLiteCalls`.
- With ``connection=`` (the app's ``AsyncConnection`` or ``AsyncSession``, either database), the
  statements run in the greenlet bridge over that connection, in the app's transaction::

    service = container.async_schedule_service()
    job = await service.schedule_at(spec)
    async with session.begin():                      # the app's AsyncSession, same database
        session.add(order)
        await service.schedule_at(spec, connection=session)   # commits or rolls back with it

Use it from one event loop (the engine's pooled connections belong to the loop that opened them).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.engine import Connection
from sqlalchemy.util import greenlet_spawn

from schedule_sdk.adapters.sql.store import ConnectionJobStore
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.domain.errors import TransactionNotJoinable
from schedule_sdk.domain.history import FireRecord
from schedule_sdk.domain.jobs import JobPage, JobSpec, OneShotSpec, RepeatSpec, ScheduledJob
from schedule_sdk.domain.status import JobStatus
from schedule_sdk.domain.timing import FireTime
from schedule_sdk.domain.upcoming import UpcomingFire, UpcomingGroups, UpcomingPage
from schedule_sdk.ports import Clock, ExecutionQueue, Metrics, Tracing

if TYPE_CHECKING:  # sqlalchemy.ext.asyncio needs greenlet (the async extra): imported when used
    from sqlalchemy.ext.asyncio import AsyncEngine

    from schedule_sdk.aio.sqlite_calls import SQLiteCalls

T = TypeVar("T")


class AsyncScheduleService:
    """Schedule, cancel, reschedule and query jobs from async code (see the module docstring)."""

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        queue: ExecutionQueue,
        clock: Clock,
        max_payload_bytes: int = 65_536,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
        sqlite: SQLiteCalls | None = None,
    ) -> None:
        self.engine = engine
        self._metrics = metrics
        self._tracing = tracing
        #: SQLite: how calls without ``connection=`` run (None: through the asyncio engine).
        self._sqlite = sqlite
        self._queue = queue
        self._clock = clock
        self._max_payload_bytes = max_payload_bytes

    async def schedule_at(self, spec: OneShotSpec, *, connection: object | None = None) -> ScheduledJob:
        """:meth:`ScheduleService.schedule_at <schedule_sdk.ScheduleService.schedule_at>`, awaited;
        ``connection`` may be the app's ``AsyncConnection`` or ``AsyncSession`` (or a sync one)."""
        return await self._call(lambda s, c: s.schedule_at(spec, connection=c), connection)

    async def schedule_repeat(self, spec: RepeatSpec, *, connection: object | None = None) -> ScheduledJob:
        """:meth:`ScheduleService.schedule_repeat <schedule_sdk.ScheduleService.schedule_repeat>`, awaited."""
        return await self._call(lambda s, c: s.schedule_repeat(spec, connection=c), connection)

    async def schedule_many(self, specs: Sequence[JobSpec]) -> builtins.list[ScheduledJob]:
        """:meth:`ScheduleService.schedule_many <schedule_sdk.ScheduleService.schedule_many>`, awaited."""
        return await self._call(lambda s, _: s.schedule_many(specs), None, small=False)

    async def cancel(self, job_id: str, *, connection: object | None = None) -> None:
        """:meth:`ScheduleService.cancel <schedule_sdk.ScheduleService.cancel>`, awaited."""
        await self._call(lambda s, c: s.cancel(job_id, connection=c), connection)

    async def reschedule(
        self, job_id: str, spec: JobSpec, *, connection: object | None = None
    ) -> ScheduledJob:
        """:meth:`ScheduleService.reschedule <schedule_sdk.ScheduleService.reschedule>`, awaited."""
        return await self._call(lambda s, c: s.reschedule(job_id, spec, connection=c), connection)

    async def pause(self, job_id: str) -> ScheduledJob:
        """:meth:`ScheduleService.pause <schedule_sdk.ScheduleService.pause>`, awaited."""
        return await self._call(lambda s, _: s.pause(job_id), None)

    async def resume(self, job_id: str) -> ScheduledJob:
        """:meth:`ScheduleService.resume <schedule_sdk.ScheduleService.resume>`, awaited."""
        return await self._call(lambda s, _: s.resume(job_id), None)

    async def trigger(self, job_id: str) -> ScheduledJob:
        """:meth:`ScheduleService.trigger <schedule_sdk.ScheduleService.trigger>`, awaited."""
        return await self._call(lambda s, _: s.trigger(job_id), None)

    async def requeue(self, job_id: str) -> ScheduledJob:
        """:meth:`ScheduleService.requeue <schedule_sdk.ScheduleService.requeue>`, awaited."""
        return await self._call(lambda s, _: s.requeue(job_id), None)

    async def history(
        self, job_id: str, *, limit: int = 50, before: datetime | None = None
    ) -> builtins.list[FireRecord]:
        """:meth:`ScheduleService.history <schedule_sdk.ScheduleService.history>`, awaited."""
        return await self._call(lambda s, _: s.history(job_id, limit=limit, before=before), None)

    async def preview(self, spec_or_job_id: JobSpec | str, n: int = 5) -> list[FireTime]:
        """:meth:`ScheduleService.preview <schedule_sdk.ScheduleService.preview>`, awaited."""
        return await self._call(lambda s, _: s.preview(spec_or_job_id, n), None)

    async def upcoming(
        self,
        window: timedelta,
        *,
        limit: int = 100,
        topic: str | None = None,
        tenant: str | None = None,
        owner: str | None = None,
    ) -> builtins.list[UpcomingFire]:
        """:meth:`ScheduleService.upcoming <schedule_sdk.ScheduleService.upcoming>`, awaited."""
        filters: dict[str, Any] = {"limit": limit, "topic": topic, "tenant": tenant, "owner": owner}
        return await self._call(lambda s, _: s.upcoming(window, **filters), None)

    async def upcoming_page(self, window: timedelta, **options: Any) -> UpcomingPage:
        """:meth:`ScheduleService.upcoming_page <schedule_sdk.ScheduleService.upcoming_page>`,
        awaited (the same keyword arguments)."""
        return await self._call(lambda s, _: s.upcoming_page(window, **options), None)

    async def upcoming_by_job(self, window: timedelta, **options: Any) -> UpcomingGroups:
        """:meth:`ScheduleService.upcoming_by_job <schedule_sdk.ScheduleService.upcoming_by_job>`,
        awaited (the same keyword arguments)."""
        return await self._call(lambda s, _: s.upcoming_by_job(window, **options), None)

    async def get_by_id(self, job_id: str) -> ScheduledJob | None:
        """The job, or None if no job has this id."""
        return await self._call(lambda s, _: s.get_by_id(job_id), None)

    async def list(
        self,
        *,
        owner_id: str | None = None,
        tenant_id: str | None = None,
        topic: str | None = None,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> JobPage:
        """:meth:`ScheduleService.list <schedule_sdk.ScheduleService.list>`, awaited."""
        filters: dict[str, Any] = {"owner_id": owner_id, "tenant_id": tenant_id, "topic": topic}
        filters.update(status=status, limit=limit, cursor=cursor)
        return await self._call(lambda s, _: s.list(**filters), None)

    # -- internals ---------------------------------------------------------------------------

    def _on_own_connection(self, call: Callable[[ScheduleService, object | None], T]) -> T:
        """In one greenlet (SQLAlchemy's bridge: each driver call is awaited on the running loop):
        check a connection out of the asyncio engine's pool, make the call, check it back in.
        ``AsyncEngine.connect`` + ``run_sync`` + close would spawn three greenlets per call."""
        with self.engine.sync_engine.connect() as conn:
            return call(self._service(conn), None)

    def _service(self, conn: Connection) -> ScheduleService:
        return ScheduleService(
            store=ConnectionJobStore(conn, home=self.engine.sync_engine),
            queue=self._queue,
            clock=self._clock,
            max_payload_bytes=self._max_payload_bytes,
            metrics=self._metrics,
            tracing=self._tracing,
        )

    async def _call(
        self,
        call: Callable[[ScheduleService, object | None], T],
        connection: object | None,
        *,
        small: bool = True,
    ) -> T:
        from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

        if connection is None:
            if self._sqlite is not None:
                return await self._sqlite.run(lambda service: call(service, None), inline=small)
            return await greenlet_spawn(self._on_own_connection, call)
        if isinstance(connection, AsyncSession):
            # The session's connection to the SDK's database (begun if needed), then its sync side.
            joined = await connection.connection()
            return await joined.run_sync(lambda sync: call(self._service(sync), connection.sync_session))
        if isinstance(connection, AsyncConnection):
            return await connection.run_sync(lambda sync: call(self._service(sync), sync))
        raise TransactionNotJoinable(
            "AsyncScheduleService takes an AsyncConnection or AsyncSession as connection= (use "
            f"ScheduleService with a {type(connection).__name__})"
        )
