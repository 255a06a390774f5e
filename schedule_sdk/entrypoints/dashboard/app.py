"""The dashboard's pages and actions (Starlette routes rendering Jinja2 templates, autoescaped)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from schedule_sdk.core.service import ScheduleService
from schedule_sdk.domain import timing
from schedule_sdk.domain.errors import JobNotFound, ScheduleError
from schedule_sdk.domain.jobs import (
    CronRepeat,
    IntervalRepeat,
    JobSpec,
    OneShotSpec,
    RepeatSpec,
    ScheduledJob,
)
from schedule_sdk.domain.overview import COUNT_CAP, WINDOWS
from schedule_sdk.domain.status import FINISHED_STATUSES, JobStatus
from schedule_sdk.domain.timers import TimerState
from schedule_sdk.entrypoints.dashboard import coupling, plots
from schedule_sdk.entrypoints.dashboard.security import Access, AuthHook
from schedule_sdk.ports import Clock, JobStore, OperatorReads, WorkerRegistry, require

PAGE_SIZE = 50
HISTORY_SIZE = 50
#: action -> (button label, the statuses it applies to, what the confirmation asks)
ACTIONS: dict[str, tuple[str, frozenset[JobStatus], str]] = {
    "trigger": ("Trigger now", frozenset({JobStatus.PENDING}), "Fire this job now, as one extra fire?"),
    "pause": ("Pause", frozenset({JobStatus.PENDING, JobStatus.ACTIVE}), "Hold this job until resumed?"),
    "resume": ("Resume", frozenset({JobStatus.PAUSED}), "Let this job fire again?"),
    "reschedule": (
        "Reschedule",
        frozenset({JobStatus.PENDING, JobStatus.ACTIVE, JobStatus.PAUSED}),
        "Replace this job with a new one on this schedule (a new id; this one is cancelled)?",
    ),
    "cancel": (
        "Cancel",
        frozenset({JobStatus.PENDING, JobStatus.ACTIVE, JobStatus.PAUSED}),
        "Cancel this job? It will never fire again.",
    ),
}


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
        autoescape=True,  # every value is escaped unless a template says otherwise (none does)
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["utc"] = lambda v: "" if v is None else v.strftime("%Y-%m-%d %H:%M:%S UTC")
    env.filters["count"] = lambda n: f"{COUNT_CAP:,}+" if n > COUNT_CAP else f"{n:,}"
    env.filters["ms"] = lambda v: "" if v is None else plots._ms(int(v))
    return env


class Dashboard:
    """The pages; :func:`create_dashboard` builds one and returns its Starlette app."""

    def __init__(
        self,
        *,
        service: ScheduleService,
        store: JobStore,
        reads: OperatorReads,
        clock: Clock,
        access: Access,
        title: str,
    ) -> None:
        self.service = service
        self.store = store
        self.clock = clock
        self.access = access
        self.title = title
        self.reads = reads
        self.env = _environment()

    def routes(self) -> list[Route]:
        return [
            Route("/", self.overview),
            Route("/jobs", self.jobs),
            Route("/jobs/{job_id}", self.job),
            Route("/jobs/{job_id}/{action}", self.confirm, methods=["GET"]),
            Route("/jobs/{job_id}/{action}", self.act, methods=["POST"]),
            Route("/workers", self.workers),
            Route("/timers", self.timers),
            Route("/login", self.login_form, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
        ]

    # -- rendering ------------------------------------------------------------------------------

    def render(self, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        nonce, new = self.access.csrf_nonce(request)
        base = request.scope.get("root_path", "").rstrip("/")
        values.update(
            title=self.title,
            base=base,
            page=template.removesuffix(".html"),
            can_act=self.access.can_act(request),
            uses_token=self.access.uses_token,
            csrf=self.access.csrf_token(nonce),
            now=self.clock.now(),
        )
        response = HTMLResponse(self.env.get_template(template).render(**values), status_code=status)
        if new:
            self.access.set_csrf(response, nonce, base or "/")
        return response

    # -- pages ----------------------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        minutes = _int(request.query_params.get("window"), 60)
        if minutes not in WINDOWS:
            minutes = 60
        data = self.reads.overview(self.clock.now(), minutes)
        return self.render(
            request,
            "overview.html",
            overview=data,
            window=minutes,
            windows=sorted(WINDOWS),
            fires=plots.fires_per_bucket(data),
            lateness=plots.lateness(data),
            topics=plots.failures_by_topic(data),
            counts=self.reads.status_counts(),
        )

    def jobs(self, request: Request) -> Response:
        q = request.query_params
        filters = {k: (q.get(k) or "").strip() or None for k in ("topic", "owner_id", "tenant_id")}
        status_text = (q.get("status") or "").strip() or None
        error: str | None = None
        try:
            status = None if status_text is None else JobStatus(status_text)
            cursor = q.get("cursor") or None
            page = self.service.list(status=status, limit=PAGE_SIZE, cursor=cursor, **filters)
        except (ValueError, ScheduleError) as problem:
            status, page, error = None, None, str(problem)
        items = page.items if page else []
        rows = [(job, coupling.next_fires(self.service, job)) for job in items]
        query = {k: v for k, v in {**filters, "status": status_text}.items() if v}
        next_url = None
        if page and page.next_cursor:
            next_url = "?" + urlencode({**query, "cursor": page.next_cursor})
        total = self.reads.count_jobs(status, **filters) if error is None else 0
        return self.render(
            request,
            "jobs.html",
            status=400 if error else 200,
            rows=rows,
            filters=filters,
            status_text=status_text or "",
            statuses=[s.value for s in JobStatus],
            next_url=next_url,
            first_url="?" + urlencode(query) if q.get("cursor") else None,
            total=total,
            error=error,
        )

    def _job_or_404(self, request: Request) -> ScheduledJob | Response:
        job_id = request.path_params["job_id"]
        job = self.service.get_by_id(job_id)
        if job is None:
            return self.render(request, "error.html", 404, message=str(JobNotFound(job_id)))
        return job

    def job(self, request: Request) -> Response:
        job = self._job_or_404(request)
        if isinstance(job, Response):
            return job
        return self.render(
            request,
            "job.html",
            job=job,
            payload=_pretty(job.payload),
            spec=_spec_text(job),
            history=self.service.history(job.id, limit=HISTORY_SIZE),
            preview=coupling.next_fires(self.service, job),
            actions=[(name, label) for name, (label, applies, _) in ACTIONS.items() if job.status in applies],
            finished=job.status in FINISHED_STATUSES,
            done=request.query_params.get("done"),
        )

    def workers(self, request: Request) -> Response:
        registry = require(self.store, WorkerRegistry, "the dashboard's workers page")
        found, live = coupling.workers(registry, self.reads, self.clock.now())
        return self.render(request, "workers.html", workers=found, live=live)

    def timers(self, request: Request) -> Response:
        q = request.query_params
        tenant = (q.get("tenant") or "").strip() or None
        state = TimerState.REACHED if q.get("state") == TimerState.REACHED.value else TimerState.SCHEDULED
        after = _timer_cursor(q.get("after_due"), q.get("after_call"))
        tenants = self.reads.timer_tenants()
        entries, next_url, total = [], None, 0
        if tenant is not None:
            entries = self.reads.timers(tenant, state, PAGE_SIZE + 1, after)
            if len(entries) > PAGE_SIZE:
                entries = entries[:PAGE_SIZE]
                last = entries[-1]
                next_url = "?" + urlencode(
                    {
                        "tenant": tenant,
                        "state": state.value,
                        "after_due": last.due_at.isoformat(),
                        "after_call": last.service_call_id,
                    }
                )
            total = self.reads.count_timers(tenant, state)
        return self.render(
            request,
            "timers.html",
            tenants=tenants,
            tenant=tenant or "",
            state=state.value,
            states=[s.value for s in TimerState],
            entries=entries,
            next_url=next_url,
            total=total,
        )

    # -- actions --------------------------------------------------------------------------------

    def confirm(self, request: Request) -> Response:
        action = request.path_params["action"]
        if action not in ACTIONS:
            return self.render(request, "error.html", 404, message=f"no action {action!r}")
        job = self._job_or_404(request)
        if isinstance(job, Response):
            return job
        if not self.access.can_act(request):
            return self.render(request, "error.html", 403, message=_READ_ONLY)
        return self._confirm_page(request, job, action)

    def _confirm_page(
        self, request: Request, job: ScheduledJob, action: str, error: str | None = None, status: int = 200
    ) -> Response:
        label, _, question = ACTIONS[action]
        return self.render(
            request,
            "confirm.html",
            status,
            job=job,
            action=action,
            label=label,
            question=question,
            error=error,
            defaults=_reschedule_defaults(job),
        )

    async def act(self, request: Request) -> Response:
        action = request.path_params["action"]
        if action not in ACTIONS:
            return self.render(request, "error.html", 404, message=f"no action {action!r}")
        if not self.access.can_act(request):
            return self.render(request, "error.html", 403, message=_READ_ONLY)
        form = await request.form()
        if not self.access.csrf_ok(request, str(form.get("csrf", ""))):
            return self.render(request, "error.html", 403, message=_FORM_EXPIRED)
        job_id = request.path_params["job_id"]
        fields = {k: str(v) for k, v in form.items()}
        try:
            target = await run_in_threadpool(self._perform, job_id, action, fields)
        except JobNotFound as missing:
            return self.render(request, "error.html", 404, message=str(missing))
        except (ScheduleError, ValueError) as refused:
            job = await run_in_threadpool(self.service.get_by_id, job_id)
            if job is None:
                return self.render(request, "error.html", 404, message=str(refused))
            return self._confirm_page(request, job, action, error=str(refused), status=409)
        base = request.scope.get("root_path", "").rstrip("/")
        return RedirectResponse(f"{base}/jobs/{target}?done={action}", status_code=303)

    def _perform(self, job_id: str, action: str, form: Mapping[str, str]) -> str:
        """Do ``action``; return the id of the job to show next."""
        service = self.service
        steer: dict[str, Callable[[str], object]] = {
            "cancel": service.cancel,
            "pause": service.pause,
            "resume": service.resume,
            "trigger": service.trigger,
        }
        if action in steer:
            steer[action](job_id)
            return job_id
        job = service.get_by_id(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return service.reschedule(job_id, _reschedule_spec(job, form)).id

    # -- login ----------------------------------------------------------------------------------

    def login_form(self, request: Request) -> Response:
        return self.render(request, "login.html", error=None)

    async def login(self, request: Request) -> Response:
        form = await request.form()
        base = request.scope.get("root_path", "").rstrip("/")
        if not self.access.csrf_ok(request, str(form.get("csrf", ""))):
            return self.render(request, "error.html", 403, message=_FORM_EXPIRED)
        if not self.access.check_token(str(form.get("token", ""))):
            return self.render(request, "login.html", 403, error="That token is not right.")
        response = RedirectResponse(f"{base}/", status_code=303)
        self.access.log_in(response, base or "/")
        return response

    async def logout(self, request: Request) -> Response:
        form = await request.form()
        base = request.scope.get("root_path", "").rstrip("/")
        if not self.access.csrf_ok(request, str(form.get("csrf", ""))):
            return self.render(request, "error.html", 403, message=_FORM_EXPIRED)
        response = RedirectResponse(f"{base}/", status_code=303)
        self.access.log_out(response, base or "/")
        return response


_FORM_EXPIRED = "The form expired or did not come from here (reload the page and try again)."
_READ_ONLY = (
    "This dashboard is read-only: actions need an auth hook or an access token "
    "(create_dashboard(..., auth=...) or token=...)."
)


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _pretty(payload: object) -> str:
    return "" if payload is None else json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True)


def _spec_text(job: ScheduledJob) -> dict[str, str]:
    spec: dict[str, str] = {"kind": "one-shot" if job.repeat is None else "repeating"}
    if isinstance(job.repeat, CronRepeat):
        spec["cron"] = f"{job.repeat.expression} ({job.zone_for_repeat})"
    elif isinstance(job.repeat, IntervalRepeat):
        spec["every"] = plots._ms(job.repeat.every_ms)
    backoff = job.retry.backoff
    spec["retry"] = f"{job.retry.attempts} attempt(s), {backoff.type} {backoff.delay_ms} ms"
    spec["misfire"] = json.dumps(job.misfire.to_dict(), sort_keys=True)
    if job.limit is not None:
        spec["limit"] = str(job.limit)
    if job.ends_at is not None:
        spec["ends at"] = job.ends_at.isoformat()
    return spec


def _reschedule_defaults(job: ScheduledJob) -> dict[str, str]:
    zone = timing.zone(job.timezone)
    if isinstance(job.repeat, CronRepeat):
        return {"cron": job.repeat.expression}
    if isinstance(job.repeat, IntervalRepeat):
        return {"every_seconds": f"{job.repeat.every_ms / 1000:g}"}
    return {"run_at": job.run_at.astimezone(zone).strftime("%Y-%m-%dT%H:%M:%S"), "zone": job.timezone}


def _reschedule_spec(job: ScheduledJob, form: Mapping[str, str]) -> JobSpec:
    """The replacement's spec: the job's own, with the schedule from the form (a one-shot's new
    wall time in its zone, a cron expression, or an interval in seconds). The client request id
    is not carried over (it stays with the cancelled job)."""
    meta = job.metadata.__class__(
        owner_id=job.metadata.owner_id,
        tenant_id=job.metadata.tenant_id,
        correlation_id=job.metadata.correlation_id,
    )
    common: dict[str, Any] = {
        "topic": job.topic,
        "timezone": job.timezone,
        "payload": job.payload,
        "metadata": meta,
        "retry": job.retry,
        "misfire": job.misfire,
    }
    if job.repeat is None:
        wall = datetime.fromisoformat(form.get("run_at", "").strip())
        if wall.tzinfo is not None:
            raise ValueError("give the wall time without an offset; it is read in the job's time zone")
        return OneShotSpec(run_at=timing.wall_instant(wall, job.timezone), **common)
    if isinstance(job.repeat, CronRepeat):
        repeat: CronRepeat | IntervalRepeat = CronRepeat(
            expression=form.get("cron", "").strip(), timezone=job.repeat.timezone
        )
    else:
        seconds = float(form.get("every_seconds", "").strip())
        repeat = IntervalRepeat(every_ms=round(seconds * 1000))
    return RepeatSpec(repeat=repeat, limit=job.limit, ends_at=job.ends_at, **common)


def _timer_cursor(due: str | None, call: str | None) -> tuple[datetime, str] | None:
    if not due or call is None:
        return None
    try:
        instant = datetime.fromisoformat(due)
    except ValueError:
        return None
    return (instant, call) if instant.tzinfo is not None else None


__all__ = ["ACTIONS", "AuthHook", "Dashboard"]
