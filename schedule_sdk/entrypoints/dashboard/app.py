"""The dashboard's pages and actions (Starlette routes rendering Jinja2 templates, autoescaped).

Every input that crosses here (path, query string, form) is checked before it reaches the
service or the store: text by the domain's one rule (no NUL, no lone surrogate) and a length
bound, instants and numbers for overflow. A refused input gets a 400 page naming the error's code
and writes nothing; the store being unreachable is a 503; nothing a visitor sends is a 500.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from schedule_sdk.core.liveness import is_dead
from schedule_sdk.core.service import ScheduleService, shown_history
from schedule_sdk.domain import timing
from schedule_sdk.domain.calendars import Calendar
from schedule_sdk.domain.errors import (
    InvalidCursor,
    InvalidInterval,
    InvalidPayload,
    InvalidTimeLimit,
    JobNotFound,
    ScheduleError,
    ScheduleUnavailable,
    ScheduleValidationError,
)
from schedule_sdk.domain.jobs import (
    MAX_METADATA_LENGTH,
    MAX_TOPIC_LENGTH,
    CronRepeat,
    IntervalRepeat,
    JobSpec,
    OneShotSpec,
    RepeatSpec,
    ScheduledJob,
    check_overlap,
)
from schedule_sdk.domain.overview import (
    COUNT_CAP,
    JOB_SORTS,
    MAX_SEARCH_TEXT,
    SEARCH_WINDOW,
    WINDOWS,
    JobSearch,
)
from schedule_sdk.domain.status import FINISHED_STATUSES, JobStatus
from schedule_sdk.domain.text import unstorable_character
from schedule_sdk.domain.time_limits import MAX_TIME_LIMIT, check_time_limit, limit_ms
from schedule_sdk.domain.timers import TIMER_TOPIC, TimerState
from schedule_sdk.domain.upcoming import UpcomingFire
from schedule_sdk.entrypoints.dashboard import coupling, plots
from schedule_sdk.entrypoints.dashboard.security import (
    Access,
    AuthHook,
    FormRefused,
    Grant,
    SecurityHeaders,
    client_of,
    read_form,
)
from schedule_sdk.ports import (
    Clock,
    DeclaredRows,
    JobStore,
    OperatorReads,
    WorkerRegistry,
    provided,
    require,
)

PAGE_SIZE = 50
#: The "what fires next" page: this far ahead, at most this many fires.
UPCOMING_WINDOW = timedelta(hours=24)
UPCOMING_LIMIT = 500
HISTORY_SIZE = 50
#: Ids are UUIDs (36 characters): a longer one names no job.
MAX_ID_LENGTH = 64
#: The longest interval the reschedule form takes (about ten years), in seconds.
MAX_INTERVAL_SECONDS = 10 * 366 * 86_400
#: Nesting deeper than this in a payload typed into the reschedule form is refused.
MAX_PAYLOAD_DEPTH = 64
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
if hasattr(ScheduleService, "requeue"):  # the service's re-run of a finished job
    ACTIONS["requeue"] = (
        "Requeue",
        frozenset({JobStatus.FAILED, JobStatus.COMPLETED, JobStatus.CANCELLED}),
        "Run this job again (a new occurrence; its history is kept)?",
    )
#: The actions the jobs list applies to a selection of jobs, with one confirmation.
BULK_ACTIONS = tuple(a for a in ("cancel", "pause", "resume", "requeue") if a in ACTIONS)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_TIMER_JOB = (
    "This job belongs to a timer (tenant {tenant}, service call {call}): steer it through the timer "
    "(send it a ScheduleTimer command), so that the timer never claims a job it does not have."
)
_SCRIPT = Path(__file__).with_name("static") / "dashboard.js"


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
    env.filters["ago"] = _ago
    return env


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)  # a clock a little ahead of the store's is "just now", not "-0.0 s"
    if seconds < 90:
        return f"{seconds:.0f} s ago" if seconds >= 1 else "just now"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86_400:.0f} days ago"


@dataclass(frozen=True, slots=True)
class Alarm:
    """The banner of every page when no registered worker is live."""

    registered: int
    last_beat: datetime | None


class Dashboard:
    """The pages; :func:`create_dashboard` builds one and returns :meth:`app`."""

    def __init__(
        self,
        *,
        service: ScheduleService,
        store: JobStore,
        reads: OperatorReads,
        clock: Clock,
        access: Access,
        title: str,
        dead_after: float = 10.0,
        declared: DeclaredRows | None = None,
    ) -> None:
        self.service = service
        self.declared = declared
        self.store = store
        self.clock = clock
        self.access = access
        self.title = title
        self.reads = reads
        self.dead_after = dead_after
        self.env = _environment()

    def app(self) -> Starlette:
        """The Starlette app: the routes, the security headers on every response, typed errors
        as 400 / 503 pages."""
        return Starlette(
            routes=self.routes(),
            middleware=[Middleware(SecurityHeaders)],
            exception_handlers={
                ScheduleValidationError: self._refused,
                ScheduleUnavailable: self._unavailable,
                FormRefused: self._form_refused,
            },
        )

    def routes(self) -> list[Route]:
        return [
            Route("/", self.overview),
            Route("/jobs", self.jobs),
            Route("/jobs/{job_id}", self.job),
            Route("/jobs/{job_id}/{action}", self.confirm, methods=["GET"]),
            Route("/jobs/{job_id}/{action}", self.act, methods=["POST"]),
            Route("/bulk", self.bulk_confirm, methods=["GET"]),
            Route("/bulk/{action}", self.bulk_act, methods=["POST"]),
            Route("/upcoming", self.upcoming),
            Route("/workers", self.workers),
            Route("/timers", self.timers),
            Route("/login", self.login_form, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/static/dashboard.js", self.script),
        ]

    # -- rendering ------------------------------------------------------------------------------

    def render(self, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        grant = self.access.grant(request)
        values.setdefault("code", None)
        values.update(
            title=self.title,
            base=_base(request),
            page=template.removesuffix(".html"),
            can_act=grant.can_act,
            scoped=grant.tenants is not None,
            uses_token=self.access.uses_token,
            csrf=self.access.csrf_token(request),
            now=self.clock.now(),
            alarm=self._alarm(),
        )
        response = HTMLResponse(self.env.get_template(template).render(**values), status_code=status)
        if grant.new_session:
            self.access.set_session(request, response, grant.session)
        return response

    def _alarm(self) -> Alarm | None:
        """None while a registered worker is live; else what the banner says."""
        registry = provided(self.store, WorkerRegistry)
        if registry is None:
            return None
        try:
            registered = registry.workers()
        except ScheduleUnavailable:
            return None  # the page itself will say the store is unreachable
        now = self.clock.now()
        if any(not is_dead(w, now, self.dead_after) for w in registered):
            return None
        return Alarm(len(registered), max((w.last_beat for w in registered), default=None))

    def _error(self, request: Request, status: int, message: str, code: str | None = None) -> HTMLResponse:
        return self.render(request, "error.html", status, message=message, code=code)

    async def _refused(self, request: Request, error: Exception) -> Response:
        assert isinstance(error, ScheduleError)
        return self._error(request, 400, error.message, error.code)

    async def _unavailable(self, request: Request, error: Exception) -> Response:
        assert isinstance(error, ScheduleError)
        return self._error(request, 503, error.message, error.code)

    async def _form_refused(self, request: Request, error: Exception) -> Response:
        assert isinstance(error, FormRefused)
        return self._error(request, error.status, str(error))

    def script(self, request: Request) -> Response:
        return Response(_SCRIPT.read_bytes(), media_type="text/javascript")

    # -- pages ----------------------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        minutes = _int(request.query_params.get("window"), 60)
        if minutes not in WINDOWS:
            minutes = 60
        grant = self.access.grant(request)
        if grant.tenants is not None:  # the plots sum every tenant's fires: not for a scoped operator
            counts = {
                s: self.reads.count_search(JobSearch(statuses=frozenset({s}), tenants=grant.tenants))
                for s in JobStatus
            }
            return self.render(
                request, "overview.html", overview=None, counts=counts, window=minutes, windows=[]
            )
        data = self.reads.overview(self.clock.now(), minutes)
        return self.render(
            request,
            "overview.html",
            overview=data,
            unheard=self.reads.unheard(self.clock.now(), minutes),
            window=minutes,
            windows=sorted(WINDOWS),
            fires=plots.fires_per_bucket(data),
            lateness=plots.lateness(data),
            topics=plots.failures_by_topic(data),
            counts=self.reads.status_counts(),
        )

    def jobs(self, request: Request) -> Response:
        q = request.query_params
        grant = self.access.grant(request)
        form = {
            k: (q.get(k) or "").strip()
            for k in ("topic", "owner_id", "tenant_id", "status", "q", "sort", "order")
        }
        error: tuple[str, str] | None = None
        rows: list[tuple[ScheduledJob, list[coupling.PreviewFire]]] = []
        next_url = None
        total = 0
        windowed = False
        try:
            search = _search_of(form, grant, q.get("cursor"))
            windowed = search.text is not None
            if form["q"] and _UUID.fullmatch(form["q"]):
                found = self.service.get_by_id(form["q"].lower())
                items = [found] if found is not None and grant.sees(found.metadata.tenant_id) else []
                total = len(items)
            else:
                items = self.reads.search_jobs(search)
                total = self.reads.count_search(search)
            if len(items) > PAGE_SIZE:
                items = items[:PAGE_SIZE]
                last = items[-1]
                query = {k: v for k, v in form.items() if v}
                next_url = "?" + urlencode({**query, "cursor": _encode_cursor(search.sort, last)})
            rows = [(job, coupling.next_fires(self.service, job)) for job in items]
        except ScheduleValidationError as problem:
            error = (problem.message, problem.code)
        query = {k: v for k, v in form.items() if v}
        return self.render(
            request,
            "jobs.html",
            status=400 if error else 200,
            rows=rows,
            form=form,
            statuses=[s.value for s in JobStatus],
            sorts=JOB_SORTS,
            next_url=next_url,
            first_url="?" + urlencode(query) if q.get("cursor") else None,
            total=total,
            windowed=windowed,
            search_window=SEARCH_WINDOW,
            error=error[0] if error else None,
            code=error[1] if error else None,
            bulk_actions=[(a, ACTIONS[a][0]) for a in BULK_ACTIONS],
        )

    def _visible_job(self, request: Request, job_id: str) -> ScheduledJob | None:
        """The job, if this request may see it (an id that cannot exist names no job)."""
        if not job_id or len(job_id) > MAX_ID_LENGTH or unstorable_character(job_id) is not None:
            return None
        job = self.service.get_by_id(job_id)
        if job is None or not self.access.grant(request).sees(job.metadata.tenant_id):
            return None
        return job

    def _job_or_404(self, request: Request) -> ScheduledJob | Response:
        job_id = request.path_params["job_id"]
        job = self._visible_job(request, job_id)
        if job is None:
            missing = JobNotFound(job_id[:MAX_ID_LENGTH])
            return self._error(request, 404, missing.message, missing.code)
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
            history=shown_history(self.service, job, HISTORY_SIZE),
            preview=coupling.next_fires(self.service, job),
            actions=_actions_for(job),
            timer_job=_timer_note(job),
            finished=job.status in FINISHED_STATUSES,
            done=_text(request.query_params.get("done"), "done", 32),
        )

    def upcoming(self, request: Request) -> Response:
        """What fires in the next 24 h (read-only): each fire of each open job the operator may
        see, with its DST mark, paused ones marked, code-owned ones with their declared name."""
        grant = self.access.grant(request)
        if grant.tenants is None:
            fires = self.service.upcoming(UPCOMING_WINDOW, limit=UPCOMING_LIMIT)
        else:  # one read per tenant in scope, merged in time order
            scoped = [
                self.service.upcoming(UPCOMING_WINDOW, limit=UPCOMING_LIMIT, tenant=tenant)
                for tenant in sorted(grant.tenants)
            ]
            fires = sorted((f for part in scoped for f in part), key=lambda f: (f.at, f.job_id))
            fires = fires[:UPCOMING_LIMIT]
        names = {} if self.declared is None else coupling.declared_names(self.declared)
        hours: list[tuple[datetime, list[tuple[UpcomingFire, str | None]]]] = []
        for fire in fires:
            hour = fire.at.replace(minute=0, second=0, microsecond=0)
            if not hours or hours[-1][0] != hour:
                hours.append((hour, []))
            hours[-1][1].append((fire, names.get(fire.job_id)))
        return self.render(
            request,
            "upcoming.html",
            hours=hours,
            shown=len(fires),
            limit=UPCOMING_LIMIT,
            window_hours=int(UPCOMING_WINDOW.total_seconds() // 3600),
        )

    def workers(self, request: Request) -> Response:
        registry = require(self.store, WorkerRegistry, "the dashboard's workers page")
        now = self.clock.now()
        found, registered = coupling.workers(registry, self.reads, now, self.dead_after)
        # the keys' load sums every tenant's jobs: not for an operator scoped to some tenants
        scoped = self.access.grant(request).tenants is not None
        keys = None if scoped else self.store.concurrency_load(now)
        return self.render(request, "workers.html", workers=found, registered=registered, keys=keys)

    def timers(self, request: Request) -> Response:
        q = request.query_params
        grant = self.access.grant(request)
        tenant = _text(q.get("tenant"), "tenant", MAX_METADATA_LENGTH)
        state = TimerState.REACHED if q.get("state") == TimerState.REACHED.value else TimerState.SCHEDULED
        after = _timer_cursor(q.get("after_due"), q.get("after_call"))
        tenants = sorted(grant.tenants) if grant.tenants is not None else self.reads.timer_tenants()
        entries, next_url, total = [], None, 0
        if tenant is not None and grant.sees(tenant):
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
            return self._error(request, 404, f"no action {action[:40]!r}")
        job = self._job_or_404(request)
        if isinstance(job, Response):
            return job
        if not self.access.can_act(request):
            return self._error(request, 403, _READ_ONLY)
        return self._confirm_page(request, job, action)

    def _confirm_page(
        self,
        request: Request,
        job: ScheduledJob,
        action: str,
        error: ScheduleError | None = None,
        status: int = 200,
        form: Mapping[str, str] | None = None,
    ) -> Response:
        label, _, question = ACTIONS[action]
        defaults = _reschedule_defaults(job)
        if form:
            defaults.update({k: v for k, v in form.items() if k in defaults})
        return self.render(
            request,
            "confirm.html",
            status,
            job=job,
            action=action,
            label=label,
            question=question,
            error=error.message if error else _timer_note(job),
            code=error.code if error else None,
            defaults=defaults,
        )

    async def _guarded_form(self, request: Request) -> dict[str, str] | Response:
        """The form of an action POST, after the checks every one passes: may act, the body is
        bounded and well formed, the form token is this session's (or a Bearer token was sent)."""
        if not self.access.can_act(request):
            return self._error(request, 403, _READ_ONLY)
        form = await read_form(request)
        if not self.access.csrf_ok(request, form.get("csrf", "")):
            return self._error(request, 403, _FORM_EXPIRED)
        for name, value in form.items():
            problem = unstorable_character(value)
            if problem is not None:
                raise ScheduleValidationError(f"the form field {name[:40]!r} holds {problem}")
        return form

    async def act(self, request: Request) -> Response:
        action = request.path_params["action"]
        if action not in ACTIONS:
            return self._error(request, 404, f"no action {action[:40]!r}")
        form = await self._guarded_form(request)
        if isinstance(form, Response):
            return form
        job = await run_in_threadpool(self._job_or_404, request)
        if isinstance(job, Response):
            return job
        if _timer_note(job) is not None:
            return self._confirm_page(request, job, action, status=409)
        try:
            target = await run_in_threadpool(self._perform, job, action, form)
        except JobNotFound as missing:
            return self._error(request, 404, missing.message, missing.code)
        except ScheduleError as refused:
            if isinstance(refused, ScheduleUnavailable):
                raise
            status = 400 if isinstance(refused, ScheduleValidationError) else 409
            return self._confirm_page(request, job, action, error=refused, status=status, form=form)
        return RedirectResponse(f"{_base(request)}/jobs/{target}?done={action}", status_code=303)

    def _perform(self, job: ScheduledJob, action: str, form: Mapping[str, str]) -> str:
        """Do ``action``; return the id of the job to show next."""
        service = self.service
        steer: dict[str, Callable[[str], object]] = {
            "cancel": service.cancel,
            "pause": service.pause,
            "resume": service.resume,
            "trigger": service.trigger,
        }
        if action == "requeue":
            steer["requeue"] = getattr(service, "requeue")  # noqa: B009  # the service's, where it has one
        if action in steer:
            steer[action](job.id)
            return job.id
        return service.reschedule(job.id, _reschedule_spec(job, form)).id

    # -- bulk actions ---------------------------------------------------------------------------

    def _selection(self, request: Request, ids: list[str]) -> list[ScheduledJob]:
        if len(ids) > PAGE_SIZE:
            raise ScheduleValidationError(f"select at most {PAGE_SIZE} jobs at a time")
        found = [self._visible_job(request, i.strip()) for i in dict.fromkeys(ids) if i.strip()]
        return [job for job in found if job is not None]

    def bulk_confirm(self, request: Request) -> Response:
        action = request.query_params.get("action", "")
        if action not in BULK_ACTIONS:
            return self._error(request, 404, f"no bulk action {action[:40]!r}")
        if not self.access.can_act(request):
            return self._error(request, 403, _READ_ONLY)
        jobs = self._selection(request, request.query_params.getlist("job"))
        if not jobs:
            return self._error(request, 400, "Select at least one job of the list first.")
        label, applies, _ = ACTIONS[action]
        return self.render(
            request, "bulk.html", action=action, label=label, jobs=jobs, applies=applies, results=None
        )

    async def bulk_act(self, request: Request) -> Response:
        action = request.path_params["action"]
        if action not in BULK_ACTIONS:
            return self._error(request, 404, f"no bulk action {action[:40]!r}")
        form = await self._guarded_form(request)
        if isinstance(form, Response):
            return form
        ids = [i for i in form.get("job", "").split(",") if i]
        jobs = await run_in_threadpool(self._selection, request, ids)
        results = await run_in_threadpool(self._perform_each, jobs, action)
        label, applies, _ = ACTIONS[action]
        failed = any(outcome is not None for _, outcome in results)
        return self.render(
            request,
            "bulk.html",
            409 if failed else 200,
            action=action,
            label=label,
            jobs=jobs,
            applies=applies,
            results=results,
        )

    def _perform_each(self, jobs: list[ScheduledJob], action: str) -> list[tuple[ScheduledJob, str | None]]:
        """Each job on its own: one refused (a finished one, a timer's) leaves the others done."""
        results: list[tuple[ScheduledJob, str | None]] = []
        for job in jobs:
            note = _timer_note(job)
            if note is not None:
                results.append((job, note))
                continue
            try:
                self._perform(job, action, {})
                results.append((job, None))
            except ScheduleUnavailable:
                raise
            except ScheduleError as refused:
                results.append((job, f"{refused.code}: {refused.message}"))
        return results

    # -- login ----------------------------------------------------------------------------------

    def login_form(self, request: Request) -> Response:
        return self.render(request, "login.html", error=None)

    async def login(self, request: Request) -> Response:
        client = client_of(request)
        wait = self.access.throttle.retry_after(client)
        if wait:
            refused = self.render(
                request, "login.html", 429, error=f"Too many failed logins: try again in {wait} s."
            )
            refused.headers["retry-after"] = str(wait)
            return refused
        form = await read_form(request, limit=4096)
        if not self.access.csrf_ok(request, form.get("csrf", "")):
            return self._error(request, 403, _FORM_EXPIRED)
        if not self.access.check_token(form.get("token", "")):
            self.access.throttle.failed(client)
            return self.render(request, "login.html", 403, error="That token is not right.")
        response = RedirectResponse(f"{_base(request)}/", status_code=303)
        self.access.log_in(request, response)
        return response

    async def logout(self, request: Request) -> Response:
        form = await read_form(request, limit=4096)
        if not self.access.csrf_ok(request, form.get("csrf", "")):
            return self._error(request, 403, _FORM_EXPIRED)
        response = RedirectResponse(f"{_base(request)}/", status_code=303)
        self.access.log_out(request, response)
        return response


_FORM_EXPIRED = "The form expired or did not come from here (reload the page and try again)."
_READ_ONLY = (
    "This dashboard is read-only for you: actions need an auth hook that allows them or an access "
    "token (create_dashboard(..., auth=...) or token=...)."
)


def _base(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None and len(value) < 12 else default
    except ValueError:
        return default


def _text(value: str | None, what: str, max_length: int) -> str | None:
    """A text input, stripped (None when empty).

    :raises ScheduleValidationError: it holds a NUL or a lone surrogate, or is too long.
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    problem = unstorable_character(value)
    if problem is not None:
        raise ScheduleValidationError(f"{what} holds {problem}")
    if len(value) > max_length:
        raise ScheduleValidationError(f"{what} is longer than {max_length:,} characters")
    return value


def _search_of(form: Mapping[str, str], grant: Grant, cursor: str | None) -> JobSearch:
    """The jobs list's query from its form (one page and one more row, to tell "more").

    :raises ScheduleValidationError: a field is not valid (an InvalidStatus or InvalidCursor too).
    """
    status_text = _text(form.get("status"), "status", 16)
    statuses: frozenset[JobStatus] = frozenset()
    if status_text is not None:
        try:
            statuses = frozenset({JobStatus(status_text)})
        except ValueError:
            from schedule_sdk.domain.errors import InvalidStatus

            raise InvalidStatus(f"no job status {status_text!r}") from None
    sort = form.get("sort") or "created"
    if sort not in JOB_SORTS:
        raise ScheduleValidationError(f"sort by one of {', '.join(JOB_SORTS)}, not {sort[:40]!r}")
    order = form.get("order") or ("asc" if sort == "due" else "desc")
    if order not in ("asc", "desc"):
        raise ScheduleValidationError(f"order is asc or desc, not {order[:40]!r}")
    return JobSearch(
        statuses=statuses,
        topic=_text(form.get("topic"), "topic", MAX_TOPIC_LENGTH),
        owner_id=_text(form.get("owner_id"), "owner", MAX_METADATA_LENGTH),
        tenant_id=_text(form.get("tenant_id"), "tenant", MAX_METADATA_LENGTH),
        tenants=grant.tenants,
        text=_text(form.get("q"), "search text", MAX_SEARCH_TEXT),
        sort=sort,
        ascending=order == "asc",
        limit=PAGE_SIZE + 1,
        after=_decode_cursor(cursor, sort),
    )


def _encode_cursor(sort: str, job: ScheduledJob) -> str:
    value = {"created": "", "due": job.run_at.isoformat(), "updated": job.updated_at.isoformat()}[sort]
    return base64.urlsafe_b64encode(json.dumps([value, job.id]).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None, sort: str) -> tuple[str, str] | None:
    if not cursor:
        return None
    try:
        if len(cursor) > 400:
            raise ValueError("too long")
        value, job_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(value, str) or not isinstance(job_id, str) or not _UUID.fullmatch(job_id):
            raise ValueError("not a position")
        if sort != "created" and datetime.fromisoformat(value).tzinfo is None:
            raise ValueError("not an instant")
    except (ValueError, TypeError, binascii.Error, UnicodeError) as error:
        raise InvalidCursor(f"the page cursor is not one this list gave ({error})") from None
    return value, job_id


def _actions_for(job: ScheduledJob) -> list[tuple[str, str]]:
    if _timer_note(job) is not None:
        return []
    return [(name, label) for name, (label, applies, _) in ACTIONS.items() if job.status in applies]


def _timer_note(job: ScheduledJob) -> str | None:
    """Why this job may not be steered here (it is a timer's), or None."""
    if job.topic != TIMER_TOPIC:
        return None
    payload = job.payload or {}
    return _TIMER_JOB.format(tenant=payload.get("tenantId", "?"), call=payload.get("serviceCallId", "?"))


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
    if job.time_limit is not None:
        spec["time limit"] = f"{limit_ms(job.time_limit) / 1000:g} s"
    if job.concurrency is not None:
        spec["concurrency"] = f"key {job.concurrency.key}, at most {job.concurrency.limit} at once"
    if job.limit is not None:
        spec["limit"] = str(job.limit)
    if job.ends_at is not None:
        spec["ends at"] = job.ends_at.isoformat()
    if job.repeat is not None:
        spec["overlap"] = job.overlap or "none (the misfire policy decides)"
    if job.spread_ms is not None:
        window, offset = plots._ms(job.spread_ms), plots._ms(job.spread_offset_ms)
        spec["spread"] = f"window {window}, this job +{offset} after each nominal time"
    if job.jitter_ms is not None:
        spec["jitter"] = f"random 0 to {plots._ms(job.jitter_ms)} per occurrence (not previewable)"
    if job.calendar is not None:
        spec["calendar"] = _calendar_text(job.calendar)
    return spec


def _calendar_text(calendar: Calendar) -> str:
    """What a calendar excludes, in words (dates are local dates in the cron's zone)."""
    parts = []
    if calendar.weekdays:
        parts.append("every " + ", ".join(_WEEKDAYS[int(w)] for w in sorted(calendar.to_dict()["weekdays"])))
    if calendar.holidays is not None:
        where = calendar.holidays.country + (
            f"-{calendar.holidays.subdivision}" if calendar.holidays.subdivision else ""
        )
        parts.append(f"public holidays of {where}")
    if calendar.dates:
        dates = sorted(calendar.to_dict()["dates"])
        parts.append(
            ", ".join(dates[:10]) + (f" and {len(dates) - 10} more dates" if len(dates) > 10 else "")
        )
    return "excludes " + "; ".join(parts)


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _not_now(job: ScheduledJob) -> dict[str, Any]:
    """The job's spread window, jitter and calendar, carried over to its replacement (the spread
    offset of the replacement comes from its own id)."""
    options: dict[str, Any] = {}
    if job.spread_ms is not None:
        options["spread"] = timedelta(milliseconds=job.spread_ms)
    if job.jitter_ms is not None:
        options["jitter"] = timedelta(milliseconds=job.jitter_ms)
    if job.calendar is not None and job.repeat is not None:
        options["calendar"] = job.calendar
    return options


def _reschedule_defaults(job: ScheduledJob) -> dict[str, str]:
    """The reschedule form's fields, filled with the job's values: its zone (a cron's own zone
    when it has one), its schedule and its payload."""
    values = {"zone": job.zone_for_repeat, "payload": _pretty(job.payload)}
    if job.repeat is not None:
        values["overlap"] = job.overlap or ""
    values["time_limit_seconds"] = "" if job.time_limit is None else f"{limit_ms(job.time_limit) / 1000:g}"
    if isinstance(job.repeat, CronRepeat):
        values["cron"] = job.repeat.expression
    elif isinstance(job.repeat, IntervalRepeat):
        values["every_seconds"] = f"{job.repeat.every_ms / 1000:g}"
    else:
        try:
            wall = job.run_at.astimezone(timing.zone(job.timezone))
        except OverflowError:
            wall = job.run_at
        values["run_at"] = wall.strftime("%Y-%m-%dT%H:%M:%S")
    return values


def _depth(value: object, limit: int) -> int:
    """The nesting depth of a parsed JSON value, stopping at ``limit + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return depth
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _payload_of(text: str | None) -> Any:
    """The payload typed into the form (JSON object; empty: none)."""
    if text is None:
        return None
    if text.count("[") + text.count("{") > 100_000:
        raise InvalidPayload("the payload nests too deeply")
    try:
        payload = json.loads(text)
    except RecursionError:
        raise InvalidPayload(f"the payload nests deeper than {MAX_PAYLOAD_DEPTH} levels") from None
    except ValueError as error:
        raise InvalidPayload(f"the payload is not JSON: {error}") from None
    if _depth(payload, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
        raise InvalidPayload(f"the payload nests deeper than {MAX_PAYLOAD_DEPTH} levels")
    return payload


def _reschedule_spec(job: ScheduledJob, form: Mapping[str, str]) -> JobSpec:
    """The replacement's spec: the job's own, with the zone, schedule (a one-shot's new wall
    time in the zone, a cron expression, or an interval in seconds), payload and a repeating
    job's overlap policy (empty: none) from the form.
    The client request id is not carried over (it stays with the cancelled job).

    :raises ScheduleValidationError: a field is invalid (the spec's own checks, and overflow).
    """
    meta = job.metadata.__class__(
        owner_id=job.metadata.owner_id,
        tenant_id=job.metadata.tenant_id,
        correlation_id=job.metadata.correlation_id,
    )
    zone_name = _text(form.get("zone"), "zone", 64) or job.zone_for_repeat
    common: dict[str, Any] = {
        "topic": job.topic,
        "timezone": job.timezone,
        "payload": _payload_of(_text(form.get("payload"), "payload", 1 << 20))
        if "payload" in form
        else job.payload,
        "metadata": meta,
        "retry": job.retry,
        "misfire": job.misfire,
        "time_limit": _time_limit_of(form.get("time_limit_seconds"), job.time_limit),
        **_not_now(job),
        "concurrency": job.concurrency,
    }
    if job.repeat is None:
        common["timezone"] = zone_name
        text = form.get("run_at", "").strip()
        try:
            wall = datetime.fromisoformat(text)
        except ValueError:
            raise ScheduleValidationError(f"run_at {text[:40]!r} is not a date and time") from None
        if wall.tzinfo is not None:
            raise ScheduleValidationError("give the wall time without an offset; it is read in the zone")
        timing.zone(zone_name)  # InvalidTimezone first
        try:
            run_at = timing.wall_instant(wall, zone_name)
            run_at.astimezone(UTC)
        except OverflowError:
            raise ScheduleValidationError(f"run_at {text!r} in {zone_name} is out of range") from None
        return OneShotSpec(run_at=run_at, **common)
    if isinstance(job.repeat, CronRepeat):
        if job.repeat.timezone is None:
            common["timezone"] = zone_name
        repeat: CronRepeat | IntervalRepeat = CronRepeat(
            expression=form.get("cron", job.repeat.expression).strip(),
            timezone=zone_name if job.repeat.timezone is not None else None,
        )
    else:
        common["timezone"] = zone_name
        text = form.get("every_seconds", f"{job.repeat.every_ms / 1000:g}").strip()
        try:
            seconds = float(text) if len(text) < 40 else math.nan
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and 0 < seconds <= MAX_INTERVAL_SECONDS):
            raise InvalidInterval(
                f"every_seconds must be a number of seconds from 0.001 to {MAX_INTERVAL_SECONDS:,}, "
                f"not {text[:40]!r}"
            )
        repeat = IntervalRepeat(every_ms=round(seconds * 1000))
    overlap = check_overlap(_text(form.get("overlap"), "overlap", 16)) if "overlap" in form else job.overlap
    return RepeatSpec(repeat=repeat, limit=job.limit, ends_at=job.ends_at, overlap=overlap, **common)


def _time_limit_of(text: str | None, kept: timedelta | None) -> timedelta | None:
    """The time limit typed into the reschedule form, in seconds (empty: none; no field: the
    job's own, ``kept``).

    :raises InvalidTimeLimit: not a number of seconds from 0.001 to 7 days.
    """
    if text is None:
        return kept
    text = text.strip()
    if not text:
        return None
    try:
        seconds = float(text) if len(text) < 20 else math.nan
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIME_LIMIT.total_seconds()):
        raise InvalidTimeLimit(f"time_limit_seconds must be from 0.001 to 604,800 seconds, not {text!r}")
    return check_time_limit(timedelta(milliseconds=round(seconds * 1000)), "time_limit_seconds")


def _timer_cursor(due: str | None, call: str | None) -> tuple[datetime, str] | None:
    """The timers page's position: a due instant and a service call id.

    :raises InvalidCursor: the instant is not an aware one within range, or the call id is bad.
    """
    if not due or call is None:
        return None
    try:
        instant = datetime.fromisoformat(due[:64])
        if instant.tzinfo is None:
            raise ValueError("no offset")
        instant = instant.astimezone(UTC)
    except (ValueError, OverflowError) as error:
        raise InvalidCursor(f"after_due is not an instant this page gave ({error})") from None
    call_id = _text(call, "after_call", MAX_METADATA_LENGTH)
    if call_id is None:
        return None
    return instant, call_id


__all__ = ["ACTIONS", "BULK_ACTIONS", "AuthHook", "Dashboard"]
