"""The dashboard's guard: sessions, form tokens, the login throttle, token strength, cookies,
Bearer scripts, security headers, bounded forms, hostile input, tenant scopes and timers' jobs."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest
import sqlalchemy as sa

from schedule_sdk import JobMetadata, JobStatus, ScheduleValidationError
from schedule_sdk.adapters.sql.tables import schedule_jobs
from schedule_sdk.dashboard import TenantScope, create_dashboard
from schedule_sdk.domain.timers import TIMER_TOPIC
from schedule_sdk.entrypoints.dashboard.security import LOGIN_FAILURES, LOGIN_WINDOW, MAX_FORM_BYTES
from schedule_sdk.ports import WorkerRegistry, require

from .conftest import T0, Client, Site

TOKEN = "correct-horse-battery-staple"
SECRET = b"s" * 32


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


def log_in(client: Client) -> httpx.Response:
    csrf = csrf_of(client.get("/login").text)
    return client.post("/login", data={"csrf": csrf, "token": TOKEN}, follow_redirects=False)


def cancel(client: Client, job_id: str, csrf: str | None = None, **options: object) -> httpx.Response:
    if csrf is None:
        csrf = csrf_of(client.get(f"/jobs/{job_id}/cancel").text)
    return client.post(f"/jobs/{job_id}/cancel", data={"csrf": csrf}, follow_redirects=False, **options)


def test_a_login_is_a_fresh_random_session_that_logout_revokes(site: Site):
    job_id = site.one_shot()
    client = site.client(token=TOKEN, secret=SECRET)
    before = client.cookies.get("schedule_dashboard_session")
    assert log_in(client).status_code == 303
    session = client.cookies.get("schedule_dashboard_session")
    assert session and session != before and TOKEN not in session
    other = Client(client.app)
    log_in(other)
    assert other.cookies.get("schedule_dashboard_session") != session  # random, not a MAC of the token
    csrf = csrf_of(client.get(f"/jobs/{job_id}/cancel").text)
    page = client.get("/").text
    client.post("/logout", data={"csrf": csrf_of(page)})
    replay = Client(client.app)
    replay.cookies.set("schedule_dashboard_session", session)
    assert 'data-action="' not in replay.get(f"/jobs/{job_id}").text
    assert cancel(replay, job_id, csrf).status_code == 403  # the replayed cookie acts no more
    assert site.service.get_by_id(job_id).status is JobStatus.PENDING


def test_a_session_expires_and_a_token_change_revokes_every_session(site: Site):
    job_id = site.one_shot()
    client = site.client(token=TOKEN, secret=SECRET, session_ttl=timedelta(hours=1))
    log_in(client)
    session = client.cookies.get("schedule_dashboard_session")
    twin = site.client(token=TOKEN, secret=SECRET)  # another process serving the same address
    twin.cookies.set("schedule_dashboard_session", session)
    assert 'data-action="cancel"' in twin.get(f"/jobs/{job_id}").text
    changed = site.client(token=TOKEN + "-rotated", secret=SECRET)
    changed.cookies.set("schedule_dashboard_session", session)
    assert 'data-action="' not in changed.get(f"/jobs/{job_id}").text
    site.clock.advance(timedelta(hours=1, seconds=1))
    assert 'data-action="' not in client.get(f"/jobs/{job_id}").text


def test_a_form_token_works_only_with_the_session_it_was_issued_to(site: Site):
    job_id = site.one_shot()
    app = create_dashboard(site.service, store=site.store, clock=site.clock, token=TOKEN)
    attacker, victim = Client(app), Client(app)
    attacker_csrf = csrf_of(attacker.get("/login").text)  # an anonymous visitor's token
    log_in(victim)
    assert cancel(victim, job_id, attacker_csrf).status_code == 403
    assert site.service.get_by_id(job_id).status is JobStatus.PENDING
    assert cancel(victim, job_id).status_code == 303


def test_failed_logins_are_throttled_then_allowed_again(site: Site):
    client = site.client(token=TOKEN)
    csrf = csrf_of(client.get("/login").text)
    for _ in range(LOGIN_FAILURES):
        assert client.post("/login", data={"csrf": csrf, "token": "wrong"}).status_code == 403
    refused = client.post("/login", data={"csrf": csrf, "token": TOKEN}, follow_redirects=False)
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
    bearer = client.get("/", headers={"authorization": f"Bearer {TOKEN}"})
    assert "can act" not in bearer.text  # the right token waits too, by header as by form
    site.clock.advance(LOGIN_WINDOW)
    assert log_in(client).status_code == 303


def test_a_throttled_address_gets_429_for_bearer_requests_as_documented(site: Site):
    job_id = site.one_shot()
    client = site.client(token=TOKEN)
    for _ in range(LOGIN_FAILURES):  # wrong Bearer tokens count as failed logins
        assert client.get("/", headers={"authorization": "Bearer wrong"}).status_code == 200
    right = {"authorization": f"Bearer {TOKEN}"}
    for response in (client.get("/", headers=right), client.post(f"/jobs/{job_id}/cancel", headers=right)):
        assert response.status_code == 429 and int(response.headers["retry-after"]) > 0
        assert response.headers["cache-control"] == "no-store"  # the security headers too
    assert site.service.get_by_id(job_id).status is JobStatus.PENDING
    assert client.get("/").status_code == 200  # a page without a Bearer token is served as before
    site.clock.advance(LOGIN_WINDOW)  # the waits counted as no new failure
    assert client.post(f"/jobs/{job_id}/cancel", headers=right, follow_redirects=False).status_code == 303
    assert site.service.get_by_id(job_id).status is JobStatus.CANCELLED


@pytest.mark.parametrize(
    "token", ["a" * 16, "0123456789abcdef", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "abcabcabcabcabcabcabcabc"]
)
def test_a_weak_token_is_refused_with_a_typed_error(site: Site, token: str):
    with pytest.raises(ScheduleValidationError) as refused:
        site.client(token=token)
    assert refused.value.code == "SCHEDULE_INVALID_SETTING" and token not in str(refused.value)


def test_cookies_are_secure_over_https_or_when_the_setting_says(site: Site):
    app = create_dashboard(site.service, store=site.store, clock=site.clock, token=TOKEN)

    def cookie(base: str, dashboard: object = app) -> str:
        import asyncio

        async def get() -> httpx.Response:
            transport = httpx.ASGITransport(app=dashboard)  # type: ignore[arg-type]
            async with httpx.AsyncClient(transport=transport, base_url=base) as http:
                return await http.get("/login")

        return asyncio.run(get()).headers["set-cookie"].lower()

    assert "secure" in cookie("https://dash.example") and "httponly" in cookie("https://dash.example")
    assert "secure" not in cookie("http://127.0.0.1")
    forced = create_dashboard(site.service, store=site.store, clock=site.clock, secure_cookies=True)
    assert "secure" in cookie("http://127.0.0.1", forced)


def test_scripts_act_with_a_bearer_token_and_no_form_token(site: Site):
    job_id = site.one_shot()
    client = site.client(token=TOKEN)
    assert cancel(client, job_id, "", headers={"authorization": "Bearer wrong-token"}).status_code == 403
    done = cancel(client, job_id, "", headers={"authorization": f"Bearer {TOKEN}"})
    assert done.status_code == 303 and site.service.get_by_id(job_id).status is JobStatus.CANCELLED
    hooked = site.client(auth=lambda request: request.headers.get("authorization") == "Bearer sso")
    other = site.one_shot()
    assert cancel(hooked, other, "", headers={"authorization": "Bearer sso"}).status_code == 303


def test_security_headers_on_every_response(site: Site):
    job_id = site.one_shot()
    client = site.client(token=TOKEN)
    responses = [
        client.get("/"),
        client.get(f"/jobs/{job_id}"),
        client.get("/jobs/nope"),
        client.get("/no/such/page"),
        client.post(f"/jobs/{job_id}/cancel", data={}),
        client.get("/static/dashboard.js"),
    ]
    for response in responses:
        headers = response.headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"], response.url
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin" and headers["x-frame-options"] == "DENY"
    assert all(r.headers["cache-control"] == "no-store" for r in responses[:-1])
    assert "<script>" not in client.get("/").text  # the only script is the dashboard's own file


def test_form_bodies_are_bounded_before_parsing(site: Site):
    job_id = site.one_shot()
    client = site.client(auth=lambda request: True)
    csrf = csrf_of(client.get(f"/jobs/{job_id}/cancel").text)
    big = client.post(f"/jobs/{job_id}/cancel", data={"csrf": csrf, "x": "a" * (MAX_FORM_BYTES + 1)})
    assert big.status_code == 413
    many = client.post(f"/jobs/{job_id}/cancel", data={"csrf": csrf, **{f"f{i}": "1" for i in range(100)}})
    assert many.status_code == 400
    multipart = client.post(f"/jobs/{job_id}/cancel", data={"csrf": csrf}, files={"f": b"x"})
    assert multipart.status_code == 415
    login = client.post("/login", data={"csrf": csrf, "token": "a" * 10_000})
    assert login.status_code == 413
    assert site.service.get_by_id(job_id).status is JobStatus.PENDING


def test_hostile_paths_and_query_strings_get_typed_errors_and_write_nothing(any_site: Site):
    job_id = any_site.one_shot(metadata=JobMetadata(tenant_id="acme"))
    repeating = any_site.service.schedule_repeat(
        __import__("schedule_sdk").RepeatSpec(
            topic="dash.test",
            timezone="UTC",
            repeat=__import__("schedule_sdk").IntervalRepeat(every_ms=60_000),
        )
    )
    client = any_site.client(auth=lambda request: True)
    assert client.get("/jobs/%00").status_code == 404
    assert client.get("/jobs/%00/cancel").status_code == 404
    for path in (
        "/jobs?tenant_id=%00",
        "/jobs?topic=%00",
        "/jobs?q=%00",
        "/timers?tenant=%00",
        "/jobs?sort=x",
    ):
        response = client.get(path)
        assert response.status_code == 400 and "SCHEDULE_" in response.text, path
    assert "SCHEDULE_INVALID_CURSOR" in client.get("/jobs?cursor=!!").text
    overflow = client.get("/timers?tenant=acme&after_due=9999-12-31T23:59:59-05:00&after_call=x")
    assert overflow.status_code == 400 and "SCHEDULE_INVALID_CURSOR" in overflow.text
    assert client.get(f"/jobs?tenant_id={'x' * 300}").status_code == 400

    def reschedule(target: str, **form: str) -> httpx.Response:
        csrf = csrf_of(client.get(f"/jobs/{target}/reschedule").text)
        return client.post(f"/jobs/{target}/reschedule", data={"csrf": csrf, **form}, follow_redirects=False)

    for every in ("1e308", "inf", "nan", "-5", "0", "9" * 5000):
        refused = reschedule(repeating.id, every_seconds=every)
        assert refused.status_code == 400 and "SCHEDULE_INVALID_INTERVAL" in refused.text, every
    deep = reschedule(job_id, run_at="2030-03-05T08:30:00", payload="[" * 10_000 + "]" * 10_000)
    assert deep.status_code == 400 and "SCHEDULE_INVALID_PAYLOAD" in deep.text
    for run_at in ("0001-01-01T00:00:00", "9999-12-31T23:59:59"):
        far = reschedule(
            job_id, run_at=run_at, zone="Pacific/Kiritimati" if run_at[0] == "0" else "America/Lima"
        )
        assert far.status_code == 400 and "SCHEDULE_" in far.text, run_at
    surrogate = client.request(
        "POST",
        f"/jobs/{job_id}/reschedule",
        content=b"csrf=x&payload=%ED%A0%80",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert surrogate.status_code in (400, 403)
    nul = reschedule(job_id, run_at="2030-03-05T08:30:00", payload='{"a": "\x00"}')
    assert nul.status_code == 400 and "NUL" in nul.text
    assert len(any_site.service.list(limit=10).items) == 2  # nothing was written
    assert any_site.service.get_by_id(job_id).status is JobStatus.PENDING
    assert any_site.service.get_by_id(repeating.id).status is JobStatus.PENDING


def test_a_tenant_scope_limits_what_an_operator_sees_and_steers(site: Site):
    acme = [site.one_shot(metadata=JobMetadata(tenant_id="acme")) for _ in range(2)]
    globex = site.one_shot(metadata=JobMetadata(tenant_id="globex"))
    untenanted = site.one_shot()
    client = site.client(auth=lambda request: TenantScope({"acme"}))
    listed = re.findall(r'data-job-id="([^"]+)"', client.get("/jobs").text)
    assert sorted(listed) == sorted(acme)
    assert re.findall(r'data-job-id="([^"]+)"', client.get("/jobs?tenant_id=globex").text) == []
    assert client.get(f"/jobs?q={globex}").text.count("data-job-id") == 0  # search by id too
    for hidden in (globex, untenanted):
        assert client.get(f"/jobs/{hidden}").status_code == 404
        assert client.get(f"/jobs/{hidden}/cancel").status_code == 404
    csrf = csrf_of(client.get(f"/jobs/{acme[0]}/cancel").text)
    assert client.post(f"/jobs/{globex}/cancel", data={"csrf": csrf}).status_code == 404
    bulk = client.post("/bulk/cancel", data={"csrf": csrf, "job": [acme[0], globex]})
    assert re.findall(r'class="result" data-job-id="([^"]+)"', bulk.text) == [acme[0]]
    assert site.service.get_by_id(globex).status is JobStatus.PENDING
    assert site.service.get_by_id(acme[0]).status is JobStatus.CANCELLED
    overview = client.get("/").text
    assert 'id="scoped-note"' in overview and "plot-fires" not in overview
    looker = site.client(auth=lambda request: TenantScope({"acme"}, act=False))
    assert 'data-action="' not in looker.get(f"/jobs/{acme[1]}").text
    assert looker.get(f"/jobs/{globex}").status_code == 404


def test_a_timers_job_is_not_steered_behind_the_timers_back(site: Site):
    job_id = site.one_shot(
        payload={"tenantId": "acme", "serviceCallId": "call-1"},
        metadata=JobMetadata(tenant_id="acme", owner_id="call-1"),
    )
    with site.store.engine.begin() as conn:  # the timer's own job: apps cannot schedule on its topic
        conn.execute(sa.update(schedule_jobs).where(schedule_jobs.c.id == job_id).values(topic=TIMER_TOPIC))
    client = site.client(auth=lambda request: True)
    page = client.get(f"/jobs/{job_id}").text
    assert 'data-action="' not in page and "through the timer" in page
    refused = cancel(client, job_id)
    assert refused.status_code == 409 and "through the timer" in refused.text
    assert site.service.get_by_id(job_id).status is JobStatus.PENDING


def test_the_alarm_shows_on_every_page_while_no_worker_is_live(site: Site):
    from schedule_sdk.ports import WorkerInfo

    client = site.client()
    for path in ("/", "/jobs", "/workers", "/timers"):
        assert 'id="alarm"' in client.get(path).text, path
    worker = WorkerInfo("w-1", "host-a", 4242, "sql", T0, T0, clock_offset=-1.25, clock_error=0.0015)
    require(site.store, WorkerRegistry, "the test").beat(worker)
    assert 'id="alarm"' not in client.get("/").text
    workers = client.get("/workers").text
    assert "live" in workers and 'id="workers-note"' not in workers
    assert "-1.250 s ± 0.002" in workers  # its clock's offset from the store's, as it measured it
    site.clock.advance(timedelta(seconds=30))  # its heartbeat is now too old
    page = client.get("/jobs").text
    assert 'id="alarm"' in page and "1 registered worker(s)" in page and "30 s ago" in page
    assert ">dead<" in client.get("/workers").text
