"""The dashboard as a triage tool: order, search, the failed list's columns, bulk actions and the
reschedule of every field the service can change."""

from __future__ import annotations

import re
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from schedule_sdk import IntervalRepeat, JobMetadata, JobStatus, RepeatSpec
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.operator_reads import search_statement
from schedule_sdk.adapters.sql.tables import schedule_jobs
from schedule_sdk.domain.overview import JobSearch

from .conftest import T0, Site


def ids(html: str) -> list[str]:
    return re.findall(r'class="job-row" data-job-id="([^"]+)"', html)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found
    return found.group(1)


def test_sort_by_due_and_by_update_and_page_through_each_order(any_site: Site):
    made = [
        any_site.one_shot(run_at=T0 + timedelta(hours=10 - i)) for i in range(7)
    ]  # later made, sooner due
    client = any_site.client()
    assert ids(client.get("/jobs").text) == made[::-1]
    assert ids(client.get("/jobs?sort=due&status=pending").text) == made[::-1]  # soonest first
    assert ids(client.get("/jobs?sort=due&order=desc").text) == made
    any_site.clock.advance(timedelta(seconds=1))
    any_site.service.cancel(made[2])
    any_site.clock.advance(timedelta(seconds=1))
    any_site.service.cancel(made[5])
    assert ids(client.get("/jobs?sort=updated").text)[:2] == [made[5], made[2]]
    assert ids(client.get("/jobs?sort=updated&status=cancelled").text) == [made[5], made[2]]


def test_search_by_id_and_by_payload_text(any_site: Site):
    invoice = any_site.one_shot(payload={"invoice": "INV-4711", "note": 'say "hi" 100%'})
    any_site.one_shot(payload={"invoice": "INV-0815"})
    client = any_site.client()
    assert ids(client.get("/jobs?q=INV-4711").text) == [invoice]
    assert ids(client.get('/jobs?q=say "hi" 100%').text) == [invoice]  # quotes and % are literal
    assert ids(client.get("/jobs?q=INV-").text) != []
    assert ids(client.get("/jobs?q=_").text) == []  # _ is no wildcard
    assert ids(client.get(f"/jobs?q={invoice.upper()}").text) == [invoice]
    page = client.get("/jobs?q=INV-4711").text
    assert "among the newest 10,000" in page


def test_the_failed_list_shows_each_jobs_error_and_update_time(site: Site):
    job = site.one_shot(metadata=JobMetadata(tenant_id="acme"))
    site.one_shot()
    with site.store.engine.begin() as conn:  # as the fire path leaves a job whose attempts ran out
        conn.execute(
            sa.update(schedule_jobs)
            .where(schedule_jobs.c.id == job)
            .values(status="failed", last_error="RuntimeError: CRM answered 502")
        )
    html = site.client().get("/jobs?status=failed").text
    assert ids(html) == [job]
    assert "RuntimeError: CRM answered 502" in html and 'data-sort="updated"' in html


def test_bulk_actions_confirm_once_then_do_each_job_on_its_own(site: Site):
    jobs = [site.one_shot() for _ in range(3)]
    site.service.cancel(jobs[2])
    client = site.client(auth=lambda request: True)
    listing = client.get("/jobs").text
    assert 'data-bulk="cancel"' in listing and 'class="pick"' in listing
    confirm = client.get("/bulk", params={"action": "pause", "job": jobs})
    assert confirm.status_code == 200 and ids(confirm.text) == jobs
    assert all(site.service.get_by_id(j).status is not JobStatus.PAUSED for j in jobs)  # asked only
    done = client.post("/bulk/pause", data={"csrf": csrf_of(confirm.text), "job": jobs})
    assert done.status_code == 409  # one of them could not be paused
    outcome = dict(re.findall(r'class="result" data-job-id="([^"]+)" data-ok="(\w+)"', done.text))
    assert outcome == {jobs[0]: "yes", jobs[1]: "yes", jobs[2]: "no"}
    assert [site.service.get_by_id(j).status for j in jobs] == [
        JobStatus.PAUSED,
        JobStatus.PAUSED,
        JobStatus.CANCELLED,
    ]
    assert client.get("/bulk", params={"action": "pause", "job": ["x"] * 51}).status_code == 400
    reader = site.client()
    assert 'data-bulk="' not in reader.get("/jobs").text
    assert reader.post("/bulk/cancel", data={"csrf": csrf_of(confirm.text), "job": jobs}).status_code == 403


def test_reschedule_changes_zone_run_time_and_payload(site: Site):
    client = site.client(auth=lambda request: True)
    job_id = site.one_shot(payload={"a": 1})

    def reschedule(target: str, **form: str):
        csrf = csrf_of(client.get(f"/jobs/{target}/reschedule").text)
        response = client.post(
            f"/jobs/{target}/reschedule", data={"csrf": csrf, **form}, follow_redirects=False
        )
        assert response.status_code == 303, response.text
        new = site.service.get_by_id(response.headers["location"].split("/")[-1].split("?")[0])
        assert new is not None
        return new

    moved = reschedule(job_id, run_at="2030-03-05T08:30:00", zone="Asia/Tokyo", payload='{"b": [2, 3]}')
    assert moved.timezone == "Asia/Tokyo" and moved.run_at == T0.replace(day=4, hour=23, minute=30)
    assert moved.payload == {"b": [2, 3]}
    form = client.get(f"/jobs/{moved.id}/reschedule").text
    assert 'value="Asia/Tokyo"' in form and "&#34;b&#34;" in form
    repeating = site.service.schedule_repeat(
        RepeatSpec(
            topic="dash.test", timezone="UTC", repeat=IntervalRepeat(every_ms=60_000), payload={"x": 1}
        )
    )
    every = reschedule(repeating.id, every_seconds="90", zone="Europe/Berlin", payload="")
    assert every.repeat == IntervalRepeat(every_ms=90_000) and every.timezone == "Europe/Berlin"
    assert every.payload is None


PLANS = {
    "newest first, by topic": (JobSearch(topic="billing.due", limit=51), "ix_schedule_jobs_topic"),
    "newest first": (JobSearch(limit=51), "sqlite_autoindex_schedule_jobs"),
    "soonest pending": (
        JobSearch(statuses=frozenset({JobStatus.PENDING}), sort="due", ascending=True, limit=51),
        "ix_schedule_jobs_pending_due",
    ),
    "latest failed": (
        JobSearch(statuses=frozenset({JobStatus.FAILED}), sort="updated", limit=51),
        "ix_schedule_jobs_",
    ),
}


@pytest.mark.parametrize("name", list(PLANS))
def test_the_jobs_list_walks_an_index_in_its_order(name: str, tmp_path: Path) -> None:
    """At any size, a page of the list in an indexed order reads about a page of index entries."""
    engine = make_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    schema.upgrade(engine)
    engine.dispose()
    search, index = PLANS[name]
    sql = str(
        search_statement(search).compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True})
    )
    with sqlite3.connect(tmp_path / "jobs.db") as connection:
        plan = [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + sql)]
    # ties of the sort column are ordered by id ("RIGHT PART"): never the whole result
    assert not [step for step in plan if "B-TREE FOR ORDER BY" in step or step == "SCAN schedule_jobs"], plan
    assert any(index in step for step in plan), plan


def test_requeue_a_finished_job_from_its_page_and_in_bulk(site: Site):
    failed, cancelled, pending = site.one_shot(), site.one_shot(), site.one_shot()
    with site.store.engine.begin() as conn:  # as the fire path leaves a job whose attempts ran out
        conn.execute(
            sa.update(schedule_jobs)
            .where(schedule_jobs.c.id == failed)
            .values(status="failed", last_error="boom")
        )
    site.service.cancel(cancelled)
    client = site.client(auth=lambda request: True)
    page = client.get(f"/jobs/{failed}/requeue")
    assert page.status_code == 200
    done = client.post(f"/jobs/{failed}/requeue", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert done.status_code in (200, 303), done.text
    assert site.service.get_by_id(failed).status is JobStatus.PENDING  # runs again, as a new occurrence
    confirm = client.get("/bulk", params={"action": "requeue", "job": [cancelled, pending]})
    assert confirm.status_code == 200
    bulk = client.post("/bulk/requeue", data={"csrf": csrf_of(confirm.text), "job": [cancelled, pending]})
    assert bulk.status_code == 409  # an open job cannot be requeued: refused alone, nothing written for it
    outcome = dict(re.findall(r'class="result" data-job-id="([^"]+)" data-ok="(\w+)"', bulk.text))
    assert outcome == {cancelled: "yes", pending: "no"}
    assert site.service.get_by_id(cancelled).status is JobStatus.PENDING
    assert site.service.get_by_id(pending).occurrence_count == 0
