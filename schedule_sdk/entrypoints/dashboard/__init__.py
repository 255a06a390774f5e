"""A web dashboard for jobs, fires, workers and timers: server-rendered pages (Starlette and
Jinja2, autoescaped), mountable in any ASGI app or run alone with ``schedule-sdk dashboard``.

::

    from schedule_sdk.dashboard import create_dashboard

    app.mount("/scheduler", create_dashboard(container, auth=lambda request: is_admin(request)))

Needs the ``dashboard`` extra (``pip install 'schedule-sdk[dashboard]'``) and the SQL job store.
Without ``auth`` or ``token`` the dashboard is read-only; see ``docs/howto/dashboard.md``.
"""

from __future__ import annotations

from datetime import timedelta

from starlette.applications import Starlette

from schedule_sdk.bootstrap.container import ScheduleContainer
from schedule_sdk.bootstrap.injector import containers
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.entrypoints.dashboard.app import Dashboard
from schedule_sdk.entrypoints.dashboard.security import Access, AuthHook, TenantScope
from schedule_sdk.ports import Clock, DeclaredRows, JobStore, OperatorReads, provided


def create_dashboard(
    source: ScheduleContainer | ScheduleService,
    *,
    store: JobStore | None = None,
    clock: Clock | None = None,
    auth: AuthHook | None = None,
    token: str | None = None,
    title: str = "Schedules",
    secret: bytes | None = None,
    session_ttl: timedelta = timedelta(hours=8),
    secure_cookies: bool | None = None,
    dead_after: float | None = None,
) -> Starlette:
    """The dashboard as an ASGI app, for ``app.mount(path, ...)`` or any ASGI server.

    ``source``: the container (its service, store and clock are used), or a service together
    with its ``store``, which must also implement :class:`~schedule_sdk.ports.OperatorReads`
    (the SQL job store does).
    ``auth``: ``auth(request)`` decides, per request, who may act (cancel, pause, resume,
    trigger, reschedule, the bulk actions): True (on every job), False (look only), or a
    :class:`TenantScope` naming the tenants this user may see and act on (nothing else is shown).
    Or ``token``: who presents it (the login page, which starts a session, or ``Authorization:
    Bearer <token>`` on each request, for scripts) may act on every job. With neither, the
    dashboard is read-only: no action buttons, POSTs get 403.
    ``secret``: the key of the sessions and form tokens (default: random per app, so sessions end
    with the process; give the same one to every process serving one address).
    ``session_ttl``: how long a login lasts. ``secure_cookies``: mark the cookies ``Secure``
    (default: when the request came over HTTPS).
    ``dead_after``: seconds without a heartbeat after which a worker counts as dead (default: the
    container's setting, else 10), for the "no live worker" alarm.

    :raises TypeError: the store does not implement the operator reads, or a service was given without one.
    :raises InvalidSetting: the token is too weak (see
        :func:`~schedule_sdk.entrypoints.dashboard.security.check_token_strength`), or
        ``session_ttl`` is not positive.
    """
    if isinstance(source, ScheduleService):
        service = source
        if store is None:
            raise TypeError("create_dashboard(service, store=...) needs the service's job store")
        declared = provided(store, DeclaredRows)
    elif isinstance(source, containers.Container):  # a ScheduleContainer instance
        service = source.schedule_service()
        store = store or source.store()
        clock = clock or source.clock()
        declared = source.declared_rows()
        if dead_after is None:
            dead_after = float(source.settings().dead_after)
    else:
        raise TypeError("create_dashboard takes a ScheduleContainer or a ScheduleService")
    reads = provided(store, OperatorReads)
    if reads is None:
        raise TypeError(
            "the dashboard needs a job store that implements OperatorReads (the SQL job store does)"
        )
    if clock is None:
        from schedule_sdk.adapters.clock import SystemClock

        clock = SystemClock()
    access = Access(
        auth=auth,
        token=token,
        clock=clock,
        secret=secret,
        session_ttl=session_ttl,
        secure_cookies=secure_cookies,
    )
    dashboard = Dashboard(
        service=service,
        store=store,
        reads=reads,
        clock=clock,
        access=access,
        title=title,
        dead_after=10.0 if dead_after is None else dead_after,
        declared=declared,
    )
    return dashboard.app()


__all__ = ["AuthHook", "TenantScope", "create_dashboard"]
