"""Task reminders on FastAPI: schedule, list, reschedule and cancel reminders; a listener sends them.

Requires: Python 3.11+; PostgreSQL and Redis are optional.
Install:  .venv/bin/pip install -e '.[fastapi]'   (add ',postgres' / ',rq' for those backends)
Run:      .venv/bin/python -m examples.fastapi_app
          # SQLite file reminders.db in the current directory; listens on 127.0.0.1:8000 (PORT=…)
          SCHEDULE_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1/app \
          SCHEDULE_REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python -m examples.fastapi_app
Try:      curl -X POST localhost:8000/reminders -H 'content-type: application/json' \
            -d '{"user_id": "u-1", "message": "stand up", "due_at": "2030-01-01T09:00:00+01:00",
                 "timezone": "Europe/Paris"}'
          curl 'localhost:8000/reminders?owner=u-1&limit=10'
Expected: 201 with the reminder as JSON; at its due time the log shows "reminder … sent" and
          GET /sent lists it (and, with WEBHOOK_URL set, it was POSTed there as JSON).
          Ctrl-C (or SIGTERM) stops the worker, then the server.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from schedule_sdk import (
    ScheduleError,
)
from schedule_sdk.contrib.fastapi import running_schedules

from . import endpoints, schedules
from .containers import Container

DEFAULT_DATABASE_URL = "sqlite:///reminders.db"


# --8<-- [start:lifespan]
@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    container: Container = app.state.container
    registry = container.schedule.listeners()
    registry.register(container.reminder_sender())
    container.engine.init()  # the app's tables (reminders, sent_reminders), before the first request
    # Binds the schedules declared in schedules.py (their classes built by this container), then
    # starts the worker: it syncs them, reconciles, then fires due jobs in this process. Started
    # from async code, the worker runs async listeners on this (the app's) event loop.
    async with running_schedules(container.schedule, declare=[schedules], providers=container):
        yield
    # On exit, in-flight fires finished or were released to other workers.
    registry.unregister(container.reminder_sender())
    await container.http_client().aclose()
    await container.schedule.async_engine().dispose()
    container.shutdown_resources()


# --8<-- [end:lifespan]


# --8<-- [start:errors]
async def schedule_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ScheduleError)
    body = {"code": error.code, "message": error.message}
    return JSONResponse(body, status_code=error.http_status)


# --8<-- [end:errors]


async def http_error(request: Request, error: Exception) -> JSONResponse:
    """The app's own refusals (``HTTPException``, unknown routes) in the same shape as the SDK's:
    ``{"code": ..., "message": ...}``."""
    assert isinstance(error, StarletteHTTPException)
    if isinstance(error.detail, dict) and "code" in error.detail:
        body = dict(error.detail)
    else:
        body = {"code": f"HTTP_{error.status_code}", "message": str(error.detail)}
    return JSONResponse(body, status_code=error.status_code, headers=error.headers)


async def invalid_request(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    body: dict[str, Any] = {"code": "INVALID_REQUEST", "message": "the request body or query is invalid"}
    body["errors"] = [{"loc": e["loc"], "msg": e["msg"]} for e in error.errors()]
    return JSONResponse(body, status_code=422)


# --8<-- [start:create_app]
def create_app(settings: dict[str, Any] | None = None) -> FastAPI:
    """The app; ``settings`` are schedule_sdk settings (the default database is reminders.db)."""
    container = Container()
    defaults = {"database_url": os.environ.get("SCHEDULE_DATABASE_URL", DEFAULT_DATABASE_URL)}
    container.config.schedule.from_dict({**defaults, **(settings or {})})
    container.config.webhook_url.from_value(os.environ.get("WEBHOOK_URL"))

    app = FastAPI(title="Task reminders", lifespan=lifespan)
    app.state.container = container
    app.include_router(endpoints.router)
    app.add_exception_handler(ScheduleError, schedule_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
    return app


# --8<-- [end:create_app]
