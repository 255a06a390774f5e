"""The dashboard's pages and actions (Starlette routes rendering Jinja2 templates, autoescaped).

Every input that crosses here (path, query string, form) is checked before it reaches the
service or the store: text by the domain's one rule (no NUL, no lone surrogate) and a length
bound, instants and numbers for overflow. A refused input gets a 400 page naming the error's code
and writes nothing; the store being unreachable is a 503; nothing a visitor sends is a 500.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
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
from schedule_sdk.domain.errors import (
    JobNotFound,
    ScheduleError,
    ScheduleUnavailable,
    ScheduleValidationError,
)
from schedule_sdk.domain.history import FireOutcome
from schedule_sdk.domain.jobs import MAX_METADATA_LENGTH, ScheduledJob, outcome_note, role_note
from schedule_sdk.domain.overview import COUNT_CAP, JOB_SORTS, SEARCH_WINDOW, WINDOWS, JobSearch
from schedule_sdk.domain.status import FINISHED_STATUSES, JobStatus
from schedule_sdk.domain.text import shown, unstorable_character
from schedule_sdk.domain.timers import TimerState
from schedule_sdk.entrypoints.dashboard import bulk, coupling, plots
from schedule_sdk.entrypoints.dashboard.forms import (
    PAGE_SIZE,
    UUID,
    encode_cursor,
    int_of,
    reschedule_spec,
    search_of,
    text_of,
    timer_cursor,
)
from schedule_sdk.entrypoints.dashboard.listing import FILTER_FIELDS, filter_query, sort_links
from schedule_sdk.entrypoints.dashboard.security import (
    Access,
    AuthHook,
    BearerThrottle,
    FormRefused,
    SecurityHeaders,
    client_of,
    local_next,
    read_form,
)
from schedule_sdk.entrypoints.dashboard.upcoming_page import upcoming_values
from schedule_sdk.entrypoints.dashboard.views import (
    ACTIONS,
    BULK_ACTIONS,
    actions_for,
    pretty,
    reschedule_defaults,
    spec_text,
    timer_note,
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

HISTORY_SIZE = 50
#: Ids are UUIDs (36 characters): a longer one names no job.
MAX_ID_LENGTH = 64
_SCRIPT = Path(__file__).with_name("static") / "dashboard.js"
_ICON = Path(__file__).with_name("static") / "favicon.ico"


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
    env.filters["outcome_note"] = outcome_note
    env.filters["role_note"] = role_note
    return env


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)  # a clock a little ahead of the store's is "just now", never a negative age
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
            middleware=[Middleware(SecurityHeaders), Middleware(BearerThrottle, access=self.access)],
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
            Route("/bulk/{action}/matching", self.bulk_matching_act, methods=["POST"]),
            Route("/upcoming", self.upcoming),
            Route("/workers", self.workers),
            Route("/timers", self.timers),
            Route("/login", self.login_form, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/static/dashboard.js", self.script),
            Route("/favicon.ico", self.icon),
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
            here=_here(request),
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

    def icon(self, request: Request) -> Response:
        return Response(_ICON.read_bytes(), media_type="image/x-icon")

    # -- pages ----------------------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        minutes = int_of(request.query_params.get("window"), 60)
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
        form = {k: (q.get(k) or "").strip() for k in (*FILTER_FIELDS, "sort", "order")}
        error: tuple[str, str] | None = None
        rows: list[tuple[ScheduledJob, list[coupling.PreviewFire]]] = []
        next_url = None
        total = 0
        windowed = False
        try:
            search = search_of(form, grant, q.get("cursor"))
            windowed = search.text is not None
            if form["q"] and UUID.fullmatch(form["q"]):
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
                next_url = "?" + urlencode({**query, "cursor": encode_cursor(search.sort, last)})
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
            outcomes=[o.value for o in FireOutcome],
            sorts=JOB_SORTS,
            next_url=next_url,
            first_url="?" + urlencode(query) if q.get("cursor") else None,
            total=total,
            windowed=windowed,
            search_window=SEARCH_WINDOW,
            error=error[0] if error else None,
            code=error[1] if error else None,
            bulk_actions=[(a, ACTIONS[a][0]) for a in BULK_ACTIONS],
            sort_links=sort_links(form),
            filters=filter_query(form),
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
            payload=pretty(job.payload),
            spec=spec_text(job),
            history=shown_history(self.service, job, HISTORY_SIZE),
            preview=coupling.next_fires(self.service, job),
            actions=actions_for(job),
            timer_job=timer_note(job),
            finished=job.status in FINISHED_STATUSES,
            done=text_of(request.query_params.get("done"), "done", 32),
        )

    def upcoming(self, request: Request) -> Response:
        """What fires in the next 24 h (read-only), grouped by job or as a timeline, filtered, for
        the jobs the operator may see: see :mod:`~schedule_sdk.entrypoints.dashboard.upcoming_page`."""
        values = upcoming_values(
            self.service, self.declared, self.access.grant(request), request.query_params
        )
        return self.render(request, "upcoming.html", status=400 if values["error"] else 200, **values)

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
        tenant = text_of(q.get("tenant"), "tenant", MAX_METADATA_LENGTH)
        state = TimerState.REACHED if q.get("state") == TimerState.REACHED.value else TimerState.SCHEDULED
        after = timer_cursor(q.get("after_due"), q.get("after_call"))
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
        defaults = reschedule_defaults(job)
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
            error=error.message if error else timer_note(job),
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
                raise ScheduleValidationError(f"the form field {shown(name)} holds {problem}")
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
        if timer_note(job) is not None:
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
        return service.reschedule(job.id, reschedule_spec(job, form)).id

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
        if request.query_params.get("matching"):
            return self._bulk_matching_confirm(request, action)
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

    # -- bulk actions over everything a filter matches ----------------------------------------

    def _matching(
        self, request: Request, fields: Mapping[str, str], action: str
    ) -> tuple[JobSearch, JobSearch | None]:
        """The filter of the list (as its form gives it) and the part of it ``action`` applies to."""
        form = {k: (fields.get(k) or "").strip() for k in FILTER_FIELDS}
        search = search_of(form, self.access.grant(request), None)
        return search, bulk.applicable(search, ACTIONS[action][1])

    def _bulk_matching_confirm(self, request: Request, action: str) -> Response:
        search, applicable = self._matching(request, request.query_params, action)
        label, applies, _ = ACTIONS[action]
        total = self.reads.count_search(search)
        count = 0 if applicable is None else self.reads.count_search(applicable)
        bound = None if applicable is None or not count else bulk.newest_bound(self.reads, applicable)
        fields = {k: (request.query_params.get(k) or "").strip() for k in FILTER_FIELDS}
        return self.render(
            request,
            "bulk_matching.html",
            action=action,
            label=label,
            applies=sorted(s.value for s in applies),
            total=total,
            count=count,
            limit=bulk.MAX_BULK,
            bound=bound,
            fields={k: v for k, v in fields.items() if v},
            filters=filter_query(fields),
            report=None,
        )

    async def bulk_matching_act(self, request: Request) -> Response:
        action = request.path_params["action"]
        if action not in BULK_ACTIONS:
            return self._error(request, 404, f"no bulk action {action[:40]!r}")
        form = await self._guarded_form(request)
        if isinstance(form, Response):
            return form
        search, applicable = await run_in_threadpool(self._matching, request, form, action)
        label, applies, _ = ACTIONS[action]
        expected = int_of(form.get("expected"), -1)
        report = bulk.BulkReport(expected if expected >= 0 else None)
        if applicable is not None:

            def fresh(job_id: str) -> ScheduledJob | None:
                return self._visible_job(request, job_id)

            report = await run_in_threadpool(
                bulk.walk,
                self.reads,
                applicable,
                bulk.bound_of(form.get("through")),
                fresh,
                lambda job: self._perform(job, action, {}),
                report.expected,
            )
        return self.render(
            request,
            "bulk_matching.html",
            409 if report.refused else 200,
            action=action,
            label=label,
            applies=sorted(s.value for s in applies),
            fields={},
            filters=filter_query(form),
            report=report,
        )

    def _perform_each(self, jobs: list[ScheduledJob], action: str) -> list[tuple[ScheduledJob, str | None]]:
        """Each job on its own: one refused (a finished one, a timer's) leaves the others done."""
        results: list[tuple[ScheduledJob, str | None]] = []
        for job in jobs:
            note = timer_note(job)
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
        back = local_next(request.query_params.get("next"))
        return self.render(request, "login.html", error=None, next=back)

    async def login(self, request: Request) -> Response:
        client = client_of(request)
        wait = self.access.throttle.retry_after(client)
        if wait:
            refused = self.render(
                request, "login.html", 429, error=f"Too many failed logins: try again in {wait} s.", next=None
            )
            refused.headers["retry-after"] = str(wait)
            return refused
        form = await read_form(request, limit=4096)
        if not self.access.csrf_ok(request, form.get("csrf", "")):
            return self._error(request, 403, _FORM_EXPIRED)
        back = local_next(form.get("next"))
        if not self.access.check_token(form.get("token", "")):
            self.access.throttle.failed(client)
            return self.render(request, "login.html", 403, error="That token is not right.", next=back)
        response = RedirectResponse(f"{_base(request)}{back or '/'}", status_code=303)
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


def _here(request: Request) -> str | None:
    """The page a login from this one returns to: its path in the dashboard and its query (None
    for a form's answer and for the login page itself)."""
    base, path = _base(request), request.url.path
    if request.method != "GET":
        return None
    if base and path.startswith(base):
        path = path[len(base) :] or "/"
    if path == "/login":
        return None
    query = request.url.query
    return local_next(path + (f"?{query}" if query else ""))


__all__ = ["ACTIONS", "BULK_ACTIONS", "AuthHook", "Dashboard"]
