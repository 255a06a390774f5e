"""The jobs list acting at scale: bulk actions over everything a filter matches, search in error
text, sorting by a column's header, the login's way back, the icon (through the ASGI app)."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa

from schedule_sdk import FireOutcome, JobMetadata, JobStatus, ScheduleService
from schedule_sdk.adapters.sql.tables import schedule_jobs
from schedule_sdk.dashboard import TenantScope, create_dashboard

from .conftest import T0, Client, Site, fire
from .test_pages import csrf_of
from .test_triage import ids

TOKEN = "correct-horse-battery-staple"


def statuses(site: Site, job_ids: list[str]) -> set[JobStatus]:
    return {site.service.get_by_id(j).status for j in job_ids}


def confirm_matching(client: Client, action: str, **filters: str):
    page = client.get("/bulk", params={"action": action, "matching": "1", **filters})
    assert page.status_code == 200, page.text
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text))
    return page, {k: unescape(v) for k, v in fields.items()}


def test_a_bulk_action_applies_to_every_job_the_filter_matches_across_pages(site: Site):
    matched = [site.one_shot(topic="bulk.a") for _ in range(120)]  # more than a page of the list
    others = [site.one_shot(topic="bulk.b") for _ in range(3)]
    client = site.client(auth=lambda request: True)
    listing = client.get("/jobs?topic=bulk.a").text
    assert "With all 120 matching" in listing and 'data-bulk-matching="pause"' in listing
    page, fields = confirm_matching(client, "pause", topic="bulk.a")
    assert "Pause all 120 matching job(s)?" in page.text and fields["expected"] == "120"
    assert statuses(site, matched) == {JobStatus.PENDING}  # only asked so far
    late = site.one_shot(topic="bulk.a")  # created after the confirmation: not touched
    done = client.post("/bulk/pause/matching", data=fields)
    assert done.status_code == 200, done.text
    counts = dict(re.findall(r'data-count="(\w+)">(\d+)<', done.text))
    assert counts == {"done": "120", "changed": "0", "left": "0", "refused": "0", "expected": "120"}
    assert statuses(site, matched) == {JobStatus.PAUSED}
    assert statuses(site, others + [late]) == {JobStatus.PENDING}


def test_the_confirmation_counts_only_the_jobs_the_action_applies_to(site: Site):
    open_jobs = [site.one_shot(topic="bulk.c") for _ in range(4)]
    site.service.cancel(open_jobs[0])
    client = site.client(auth=lambda request: True)
    page, fields = confirm_matching(client, "cancel", topic="bulk.c")
    assert "4 job(s) match the filter" in page.text and "Cancel all 3 matching job(s)?" in page.text
    resume, _ = confirm_matching(client, "resume", topic="bulk.c")
    assert "No matching job can be resumed" in resume.text and 'id="confirm"' not in resume.text


def test_jobs_that_changed_state_meanwhile_are_skipped_and_counted(site: Site):
    jobs = [site.one_shot(topic="bulk.d") for _ in range(6)]
    client = site.client(auth=lambda request: True)
    _, fields = confirm_matching(client, "pause", topic="bulk.d")
    site.service.cancel(jobs[0])  # since the confirmation: no longer matches

    class Racing(ScheduleService):  # another operator cancels a job while the bulk action runs
        def pause(self, job_id: str):
            if job_id == jobs[5]:
                site.service.cancel(jobs[2])
            return super().pause(job_id)

    racing = Racing(store=site.store, queue=site.service._queue, clock=site.clock)
    done = Client(create_dashboard(racing, store=site.store, clock=site.clock, auth=lambda r: True))
    _, own = confirm_matching(done, "pause", topic="bulk.d")  # this session's form token
    answer = done.post("/bulk/pause/matching", data={**fields, "csrf": own["csrf"]})
    assert answer.status_code == 200, answer.text
    counts = dict(re.findall(r'data-count="(\w+)">(\d+)<', answer.text))
    assert counts == {"done": "4", "changed": "1", "left": "1", "refused": "0", "expected": "6"}
    assert re.search(rf'data-job-id="{jobs[2]}" data-ok="no" data-changed="yes"', answer.text)
    assert site.service.get_by_id(jobs[2]).status is JobStatus.CANCELLED  # not paused over it
    assert statuses(site, [jobs[1], jobs[3], jobs[4], jobs[5]]) == {JobStatus.PAUSED}


def test_a_bulk_action_over_a_filter_needs_the_form_token_and_the_right_to_act(site: Site):
    jobs = [site.one_shot(topic="bulk.e") for _ in range(3)]
    client = site.client(auth=lambda request: True)
    _, fields = confirm_matching(client, "cancel", topic="bulk.e")
    assert client.post("/bulk/cancel/matching", data={**fields, "csrf": "forged"}).status_code == 403
    reader = site.client()
    asked = {"action": "cancel", "matching": "1", "topic": "bulk.e"}
    assert reader.get("/bulk", params=asked).status_code == 403
    assert reader.post("/bulk/cancel/matching", data=fields).status_code == 403
    assert 'data-bulk-matching="' not in reader.get("/jobs?topic=bulk.e").text
    assert statuses(site, jobs) == {JobStatus.PENDING}
    bearer = site.client(token=TOKEN)  # a script: no form token
    answer = bearer.post(
        "/bulk/cancel/matching", data={"topic": "bulk.e"}, headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert answer.status_code == 200 and statuses(site, jobs) == {JobStatus.CANCELLED}


def test_a_tenant_scoped_operator_acts_only_on_its_tenants_jobs(site: Site):
    mine = [site.one_shot(topic="bulk.f", metadata=JobMetadata(tenant_id="acme")) for _ in range(2)]
    theirs = [site.one_shot(topic="bulk.f", metadata=JobMetadata(tenant_id="globex")) for _ in range(2)]
    client = site.client(auth=lambda request: TenantScope(["acme"]))
    page, fields = confirm_matching(client, "pause", topic="bulk.f")
    assert "Pause all 2 matching" in page.text
    assert client.post("/bulk/pause/matching", data=fields).status_code == 200
    assert statuses(site, mine) == {JobStatus.PAUSED} and statuses(site, theirs) == {JobStatus.PENDING}


def test_search_finds_failed_jobs_by_the_error_their_last_attempt_raised(any_site: Site):
    site = any_site
    failed = [site.one_shot(topic="crm.push") for _ in range(3)]
    healthy = site.one_shot(topic="crm.push", payload={"note": "fine"})
    with site.store.engine.begin() as conn:  # as the fire path leaves a job whose attempts ran out
        conn.execute(
            sa.update(schedule_jobs)
            .where(schedule_jobs.c.id.in_(failed[:2]))
            .values(status="failed", last_error="ListenerFailed: ConnectionError: [Errno 111] refused")
        )
    # the third one's latest attempt raised it (its traceback says so), its row says only the wrapper
    at = T0 - timedelta(minutes=2)
    site.fires(
        fire(failed[2], at - timedelta(minutes=5), outcome=FireOutcome.SUCCEEDED),
        fire(
            failed[2],
            at,
            topic="crm.push",
            outcome=FireOutcome.FAILED,
            error="CrmDown: push failed",
            traceback="Traceback (most recent call last):\nConnectionError: [Errno 111] refused\n",
        ),
        # an older attempt of a job that has since succeeded is no match: the latest fire counts
        fire(healthy, at - timedelta(minutes=9), outcome=FireOutcome.FAILED, error="ConnectionError: x"),
        fire(healthy, at - timedelta(minutes=1), outcome=FireOutcome.SUCCEEDED),
    )
    client = site.client()
    page = client.get("/jobs?q=ConnectionError").text
    assert sorted(ids(page)) == sorted(failed) and "3 matching" in page
    assert ids(client.get("/jobs?q=ConnectionError&status=failed").text) == failed[:2][::-1]
    assert ids(client.get("/jobs?q=CrmDown").text) == [failed[2]]
    assert ids(client.get("/jobs?q=fine").text) == [healthy]  # the payload still counts


def sort_hrefs(html: str) -> dict[str, str]:
    return {k: unescape(v) for k, v in re.findall(r'data-sort="(\w+)" href="([^"]+)"', html)}


def test_column_headers_sort_keeping_the_filters_and_toggle_the_order(site: Site):
    made = [site.one_shot(topic="sort.me", run_at=T0 + timedelta(hours=h)) for h in (3, 1, 2)]
    site.one_shot(topic="sort.other")
    client = site.client()
    links = sort_hrefs(client.get("/jobs?topic=sort.me&status=pending").text)
    assert set(links) == {"created", "due", "updated"}
    due = parse_qs(urlsplit(links["due"]).query)
    assert due == {"topic": ["sort.me"], "status": ["pending"], "sort": ["due"], "order": ["asc"]}
    soonest = client.get(links["due"]).text
    assert ids(soonest) == [made[1], made[2], made[0]] and "Next fire ▲" in soonest
    toggled = sort_hrefs(soonest)["due"]
    assert parse_qs(urlsplit(toggled).query)["order"] == ["desc"]
    assert ids(client.get(toggled).text) == [made[0], made[2], made[1]]
    assert parse_qs(urlsplit(sort_hrefs(soonest)["created"]).query)["order"] == ["desc"]


def log_in(client: Client, next_value: str | None):
    form = client.get("/login", params={} if next_value is None else {"next": next_value}).text
    data = {"csrf": csrf_of(form), "token": TOKEN}
    hidden = re.search(r'name="next" value="([^"]*)"', form)
    if next_value is not None:
        data["next"] = next_value  # what a forged form would send, whatever the page held
    return client.post("/login", data=data, follow_redirects=False), hidden


def test_a_login_returns_to_the_page_asked_for(site: Site):
    client = site.client(token=TOKEN)
    page = client.get("/jobs?status=failed&topic=a%20b").text
    link = re.search(r'id="login-link" href="([^"]+)"', page)
    assert link and unescape(link.group(1)) == "/login?next=/jobs%3Fstatus%3Dfailed%26topic%3Da%2520b"
    answer, hidden = log_in(client, "/jobs?status=failed&topic=a%20b")
    assert hidden and unescape(hidden.group(1)) == "/jobs?status=failed&topic=a%20b"
    assert answer.status_code == 303 and answer.headers["location"] == "/jobs?status=failed&topic=a%20b"


@pytest.mark.parametrize(
    "target",
    ["//evil.com", "https://evil.com", "/\\evil.com", "\\\\evil.com", "javascript:alert(1)", "/\tx", "x.com"],
)
def test_a_login_never_returns_to_another_site(site: Site, target: str):
    answer, hidden = log_in(site.client(token=TOKEN), target)
    assert hidden is None  # the form does not carry it
    assert answer.status_code == 303 and answer.headers["location"] == "/"
    local, _ = log_in(site.client(token=TOKEN), "/workers")  # a path of this dashboard is followed
    assert local.headers["location"] == "/workers"


def test_the_icon_is_served_and_cached(site: Site):
    client = site.client()
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00" and "max-age=86400" in icon.headers["cache-control"]
    assert 'rel="icon" href="/favicon.ico"' in client.get("/jobs").text
