"""A web dashboard for jobs, fires, workers and timers: server-rendered pages (Starlette and
Jinja2, autoescaped), mountable in any ASGI app or run alone with ``schedule-sdk dashboard``.

::

    from schedule_sdk.dashboard import create_dashboard

    app.mount("/scheduler", create_dashboard(container, auth=lambda request: is_admin(request)))

Needs the ``dashboard`` extra (``pip install 'schedule-sdk[dashboard]'``) and the SQL job store.
Without ``auth`` or ``token`` the dashboard is read-only; see ``docs/howto/dashboard.md``.
"""

from __future__ import annotations

from dependency_injector import containers
from starlette.applications import Starlette

from schedule_sdk.bootstrap.container import ScheduleContainer
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.entrypoints.dashboard.app import Dashboard
from schedule_sdk.entrypoints.dashboard.security import Access, AuthHook
from schedule_sdk.ports import Clock, JobStore, OperatorReads


def create_dashboard(
    source: ScheduleContainer | ScheduleService,
    *,
    store: JobStore | None = None,
    clock: Clock | None = None,
    auth: AuthHook | None = None,
    token: str | None = None,
    title: str = "Schedules",
    secret: bytes | None = None,
) -> Starlette:
    """The dashboard as an ASGI app, for ``app.mount(path, ...)`` or any ASGI server.

    ``source``: the container (its service, store and clock are used), or a service together
    with its ``store``, which must also implement :class:`~schedule_sdk.ports.OperatorReads`
    (the SQL job store does).
    ``auth``: ``auth(request) -> bool`` decides who may cancel, pause, resume, trigger and
    reschedule; or ``token`` (16+ characters): who presents it (login page, or ``Authorization:
    Bearer``) may. With neither, the dashboard is read-only: no action buttons, POSTs get 403.
    ``secret``: the key of the CSRF tokens (default: random per app, so tokens die with the
    process; give one when several processes serve the dashboard behind one address).

    :raises TypeError: the store does not implement the operator reads, or a service was given without one.
    """
    if isinstance(source, ScheduleService):
        service = source
        if store is None:
            raise TypeError("create_dashboard(service, store=...) needs the service's job store")
    elif isinstance(source, containers.Container):  # a ScheduleContainer instance
        service = source.schedule_service()
        store = store or source.store()
        clock = clock or source.clock()
    else:
        raise TypeError("create_dashboard takes a ScheduleContainer or a ScheduleService")
    if not isinstance(store, OperatorReads):
        raise TypeError(
            "the dashboard needs a job store that implements OperatorReads (the SQL job store does)"
        )
    if clock is None:
        from schedule_sdk.adapters.clock import SystemClock

        clock = SystemClock()
    access = Access(auth=auth, token=token, secret=secret)
    dashboard = Dashboard(service=service, store=store, reads=store, clock=clock, access=access, title=title)
    return Starlette(routes=dashboard.routes())


__all__ = ["AuthHook", "create_dashboard"]
