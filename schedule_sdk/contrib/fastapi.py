"""Run the schedules declared in code for a FastAPI (or any ASGI) app's lifespan.

:func:`running_schedules` is an async context manager for the app's own lifespan: it binds the
declared schedules of ``declare`` (modules, classes, functions, objects; see
:meth:`~schedule_sdk.core.declared.DeclaredSchedules.register`), then starts the container's
worker, which syncs them (:meth:`~schedule_sdk.core.declared.DeclaredSync.apply`) and fires due
jobs until the lifespan ends. :func:`schedules_lifespan` is the same as a whole lifespan
(``FastAPI(lifespan=schedules_lifespan(container, declare=[...]))``)::

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with running_schedules(container.schedule, declare=[schedules], providers=container):
            yield

A bad declaration fails there, before the app serves its first request
(:class:`~schedule_sdk.errors.InvalidDeclaration`, :class:`~schedule_sdk.errors.DuplicateDeclaration`).
With ``worker=False`` (an API process whose workers run elsewhere) it only syncs, once, at start.
Nothing here imports FastAPI: the lifespan protocol is an async context manager per app.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from schedule_sdk.bootstrap.container import ScheduleContainer
from schedule_sdk.core.worker import ScheduleWorker
from schedule_sdk.domain.declared import Plan

__all__ = ["running_schedules", "schedules_lifespan"]


@asynccontextmanager
async def running_schedules(
    container: ScheduleContainer,
    *,
    declare: Iterable[object] = (),
    providers: Any = None,
    worker: bool = True,
) -> AsyncIterator[ScheduleWorker | Plan | None]:
    """Bind ``declare``'s schedules on ``container``, sync them and run the worker until the block
    ends (then stop it: in-flight fires finish or are released). ``providers`` is the container
    that builds the classes whose methods are declared (the app's own; default ``container``).

    Yields the running worker; with ``worker=False``, the sync's :class:`Plan` (None when nothing
    is declared), and nothing runs in the background.

    :raises InvalidDeclaration, DuplicateDeclaration: a declaration cannot be bound.
    :raises StoreUnavailable: the sync could not write (nothing was written).
    """
    schedules = container.declared_schedules()
    for target in declare:
        schedules.register(target, container=container if providers is None else providers)
    if not worker:
        sync = container.declared_sync()
        yield await asyncio.to_thread(sync.apply) if len(schedules) else None
        return
    async with container.worker() as running:  # its start syncs the declared schedules
        yield running


def schedules_lifespan(
    container: ScheduleContainer,
    *,
    declare: Iterable[object] = (),
    providers: Any = None,
    worker: bool = True,
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A whole lifespan for ``FastAPI(lifespan=...)``: :func:`running_schedules` for each start
    of the app (the app argument is not used)."""
    targets = list(declare)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with running_schedules(container, declare=targets, providers=providers, worker=worker):
            yield

    return lifespan
