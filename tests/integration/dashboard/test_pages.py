"""The dashboard's pages, actions and security through its ASGI app (Starlette's test client)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import sqlalchemy as sa

from schedule_sdk import (
    ConcurrencyLimit,
    CronRepeat,
    FireOutcome,
    IntervalRepeat,
    JobMetadata,
    JobStatus,
    RepeatSpec,
)
from schedule_sdk.adapters.sql.tables import schedule_fires
from schedule_sdk.dashboard import create_dashboard
from schedule_sdk.ports import OperatorReads, require

from .conftest import T0, Client, Site, fire

TOKEN = "correct-horse-battery-staple"


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


def test_every_page_renders(site: Site):
    job_id = site.one_shot()
    site.fires(fire(job_id, T0 - timedelta(minutes=3)))
    client = site.client()
    for path in ("/", "/jobs", f"/jobs/{job_id}", "/workers", "/timers", "/login"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith("text/html")
    assert client.get("/jobs/01900000-0000-7000-8000-00000000dead").status_code == 404


def test_a_payload_and_an_error_holding_markup_render_as_text(site: Site):
    evil = "<script>alert('x')</script>"
    job_id = site.one_shot(payload={"note": evil}, metadata=JobMetadata(owner_id=evil))
    site.fires(
        fire(job_id, T0 - timedelta(minutes=1), outcome=FireOutcome.FAILED, error=f"RuntimeError: {evil}")
    )
    client = site.client(token=TOKEN)
    for path in (f"/jobs/{job_id}", "/jobs", f"/jobs?owner_id={evil}"):
        html = client.get(path).text
        assert "<script>" not in html, path
        assert "&lt;script&gt;" in html, path
    missing = client.get("/jobs/%3Cscript%3E")
    assert missing.status_code == 404 and "<script>" not in missing.text and "&lt;script&gt;" in missing.text


def test_without_auth_or_token_the_dashboard_is_read_only(site: Site):
    job_id = site.one_shot()
    client = site.client()
    page = client.get(f"/jobs/{job_id}").text
    assert 'data-action="' not in page and "read-only" in page
    csrf = csrf_of(client.get("/login").text)  # a valid form token does not make a reader an actor
    assert client.get(f"/jobs/{job_id}/cancel").status_code == 403
    for action in ("cancel", "pause", "trigger", "resume", "reschedule"):
        assert client.post(f"/jobs/{job_id}/{action}", data={"csrf": csrf}).status_code == 403
    assert site.service.get_by_id(job_id).status is JobStatus.PENDING


def csrf_page(client, path: str) -> str:
    return csrf_of(client.get(path).text)


def test_an_auth_hook_decides_per_request_and_actions_need_the_csrf_token(site: Site):
    job_id = site.one_shot()
    client = site.client(auth=lambda request: request.headers.get("x-admin") == "yes")
    assert 'data-action="cancel"' not in client.get(f"/jobs/{job_id}").text
    admin = {"x-admin": "yes"}
    page = client.get(f"/jobs/{job_id}", headers=admin).text
    assert {"cancel", "pause", "trigger", "reschedule"} <= set(re.findall(r'data-action="(\w+)"', page))
    confirm = client.get(f"/jobs/{job_id}/cancel", headers=admin)
    assert confirm.status_code == 200 and "Yes, cancel" in confirm.text
    csrf = csrf_of(confirm.text)
    assert client.post(f"/jobs/{job_id}/cancel", data={"csrf": csrf}).status_code == 403  # not admin
    assert client.post(f"/jobs/{job_id}/cancel", data={}, headers=admin).status_code == 403  # no token
    forged = csrf.split(".")[0] + "." + "0" * 64
    assert client.post(f"/jobs/{job_id}/cancel", data={"csrf": forged}, headers=admin).status_code == 403
    other = site.client(auth=lambda request: True)  # another dashboard: another secret
    assert other.post(f"/jobs/{job_id}/cancel", data={"csrf": csrf}).status_code == 403
    assert site.service.get_by_id(job_id).status is JobStatus.PENDING
    done = client.post(f"/jobs/{job_id}/cancel", data={"csrf": csrf}, headers=admin, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"/jobs/{job_id}?done=cancel"
    assert site.service.get_by_id(job_id).status is JobStatus.CANCELLED


def test_pause_resume_trigger_and_reschedule_through_the_forms(site: Site):
    client = site.client(auth=lambda request: True)
    job_id = site.one_shot(run_at=T0 + timedelta(hours=2))

    def act(action: str, target: str = job_id, **form: str):
        data = {"csrf": csrf_page(client, f"/jobs/{target}/{action}"), **form}
        return client.post(f"/jobs/{target}/{action}", data=data, follow_redirects=False)

    assert act("pause").status_code == 303 and site.service.get_by_id(job_id).status is JobStatus.PAUSED
    refused = act("trigger")  # a paused job cannot be triggered: the form shows why, nothing changes
    assert refused.status_code == 409 and "paused" in refused.text
    assert act("resume").status_code == 303 and site.service.get_by_id(job_id).status is JobStatus.PENDING
    assert act("trigger").status_code == 303 and site.service.get_by_id(job_id).run_at == T0
    moved = act("reschedule", run_at="2030-03-05T08:30:00")
    new_id = moved.headers["location"].split("/")[-1].split("?")[0]
    new = site.service.get_by_id(new_id)
    assert new.run_at == T0.replace(day=5, hour=8, minute=30) and new.rescheduled_from == job_id
    assert site.service.get_by_id(job_id).status is JobStatus.CANCELLED
    bad = act("reschedule", new_id, run_at="2020-01-01T00:00:00")
    assert bad.status_code == 400 and "before now" in bad.text and "SCHEDULE_RUN_AT_IN_PAST" in bad.text
    repeating = site.service.schedule_repeat(
        RepeatSpec(topic="dash.test", timezone="UTC", repeat=IntervalRepeat(every_ms=60_000))
    )
    every = act("reschedule", repeating.id, every_seconds="90")
    again = site.service.get_by_id(every.headers["location"].split("/")[-1].split("?")[0])
    assert again.repeat == IntervalRepeat(every_ms=90_000)


def test_a_token_unlocks_actions_by_login_or_bearer_header(site: Site):
    job_id = site.one_shot()
    client = site.client(token=TOKEN)
    assert 'data-action="' not in client.get(f"/jobs/{job_id}").text
    wrong = client.post("/login", data={"csrf": csrf_page(client, "/login"), "token": "nope"})
    assert wrong.status_code == 403
    ok = client.post(
        "/login", data={"csrf": csrf_page(client, "/login"), "token": TOKEN}, follow_redirects=False
    )
    assert ok.status_code == 303 and TOKEN not in ok.headers["set-cookie"]
    assert 'data-action="pause"' in client.get(f"/jobs/{job_id}").text
    bearer = site.client(token=TOKEN)
    headers = {"authorization": f"Bearer {TOKEN}"}
    csrf = csrf_of(bearer.get(f"/jobs/{job_id}/pause", headers=headers).text)
    assert bearer.post(f"/jobs/{job_id}/pause", data={"csrf": csrf}, headers=headers).status_code == 200
    assert site.service.get_by_id(job_id).status is JobStatus.PAUSED
    with pytest.raises(ValueError):
        site.client(token="short")


def test_jobs_filters_and_keyset_pages(site: Site):
    mine = [site.one_shot(topic="billing.due", metadata=JobMetadata(tenant_id="acme")) for _ in range(55)]
    site.one_shot(topic="other.thing")
    site.service.cancel(mine[3])
    client = site.client()
    first = client.get("/jobs?topic=billing.due&tenant_id=acme").text
    newest = mine[::-1]  # newest first by default
    assert re.findall(r'data-job-id="([^"]+)"', first) == newest[:50]
    assert "55 matching" in first
    next_url = re.search(r'id="next-page" href="([^"]+)"', first).group(1).replace("&amp;", "&")
    assert re.findall(r'data-job-id="([^"]+)"', client.get(next_url).text) == newest[50:]
    oldest = client.get("/jobs?topic=billing.due&tenant_id=acme&order=asc").text
    assert re.findall(r'data-job-id="([^"]+)"', oldest) == mine[:50]
    cancelled = client.get("/jobs?status=cancelled").text
    assert re.findall(r'data-job-id="([^"]+)"', cancelled) == [mine[3]]
    assert client.get("/jobs?status=bogus").status_code == 400
    assert client.get("/jobs?cursor=!!").status_code == 400


def test_the_preview_marks_a_fire_moved_by_a_dst_gap(site: Site):
    site.clock.set(T0.replace(month=3, day=27))  # Berlin springs forward on 2030-03-31 at 02:00
    job = site.service.schedule_repeat(
        RepeatSpec(topic="dash.dst", timezone="Europe/Berlin", repeat=CronRepeat(expression="30 2 * * *"))
    )
    html = site.client().get(f"/jobs/{job.id}").text
    fires = re.findall(r"<li>([^<]+)<span class=\"note\">\(([^)]+)\)</span>( <span class=\"dst\")?", html)
    assert len(fires) == 5
    assert [bool(marked) for *_, marked in fires] == [False, False, False, True, False]
    assert "2030-03-31 03:00 CEST" in fires[3][1]  # fires at the end of the gap


def test_the_overview_aggregates_fire_history_in_sql(any_site: Site):
    job_id = any_site.one_shot()
    lateness = [3, 7, 40, 900, 1500]  # classes <=5, <=10, <=50, <=1000, <=2000 ms
    records = [fire(job_id, T0 - timedelta(minutes=2, seconds=i + 1), ms) for i, ms in enumerate(lateness)]
    records += [fire(job_id, T0 - timedelta(minutes=5), 1, topic="mail.send", outcome=FireOutcome.FAILED)]
    records += [fire(job_id, T0 - timedelta(minutes=5), 1, outcome=FireOutcome.SKIPPED)]  # not a fire
    records += [fire(job_id, T0 - timedelta(minutes=90), 1)]  # outside the hour
    any_site.fires(*records)
    data = create_dashboard(any_site.service, store=any_site.store, clock=any_site.clock)
    overview = require(any_site.store, OperatorReads, "the test").overview(T0, 60)
    assert overview.total_fires == 6 and overview.total_failures == 1
    by_minute = {b.start: b for b in overview.buckets if b.fires}
    two = by_minute[T0 - timedelta(minutes=3)]  # 11:57:59 - 11:57:55: the 11:57 bucket
    assert (two.fires, two.p50_ms, two.p99_ms) == (5, 50, 2000)
    assert overview.failures_by_topic == [("mail.send", 1)]
    assert len(overview.buckets) == 61
    html = Client(data).get("/").text
    bars = re.findall(r'<rect class="bar" ', html)
    assert len(bars) == 2 and 'id="total-fires">6<' in html
    assert len(re.findall(r'<circle class="dot50"', html)) == 2
    assert "mail.send" in html
    assert 'id="unheard-fires"' not in html  # no badge while every fire was heard


def test_the_overview_shows_a_badge_for_unheard_fires(any_site: Site):
    job_id = any_site.one_shot()
    unheard = [
        fire(job_id, T0 - timedelta(minutes=m), 1, topic="log.typo", outcome=FireOutcome.UNHEARD)
        for m in (1, 2)
    ]
    any_site.fires(*unheard, fire(job_id, T0 - timedelta(minutes=90), 1, outcome=FireOutcome.UNHEARD))
    assert require(any_site.store, OperatorReads, "the test").unheard(T0, 60) == [
        ("log.typo", 2)
    ]  # the older one is outside the hour
    html = (
        Client(create_dashboard(any_site.service, store=any_site.store, clock=any_site.clock)).get("/").text
    )
    badge = re.search(
        r'<div class="stat" id="unheard-fires" title="([^"]*)"><span>unheard fires</span><b[^>]*>(\d+)<', html
    )
    assert badge and badge.groups() == ("fires no listener heard: log.typo (2)", "2")


def test_the_wide_windows_sum_whole_buckets_of_the_per_minute_summary(any_site: Site):
    job_id = any_site.one_shot()
    early = T0 - timedelta(hours=10, minutes=5)  # 01:55, in the 24 h window's 01:00 bucket
    records = [fire(job_id, early + timedelta(seconds=i), 3) for i in range(3)]
    records += [fire(job_id, early, 900, topic="mail.send", outcome=FireOutcome.FAILED)]
    records += [fire(job_id, T0 - timedelta(seconds=30), 40)]
    records += [fire(job_id, T0 - timedelta(hours=25), 1)]  # before the first bucket
    any_site.fires(*records)
    reads = require(any_site.store, OperatorReads, "the test")
    day = reads.overview(T0, 1440)
    assert len(day.buckets) == 25 and day.since == T0 - timedelta(hours=24)  # 12:00 to 12:00, hourly
    assert (day.total_fires, day.total_failures, day.failures_by_topic) == (5, 1, [("mail.send", 1)])
    [one] = [b for b in day.buckets if b.start == T0 - timedelta(hours=11)]
    assert (one.fires, one.failures, one.p50_ms, one.p99_ms) == (4, 1, 5, 1000)
    six = reads.overview(T0, 360)
    assert len(six.buckets) == 37 and (six.total_fires, six.buckets[-2].fires, six.buckets[-2].p50_ms) == (
        1,
        1,
        50,
    )
    with any_site.store.engine.begin() as conn:  # the plots read the summary, never the entries
        conn.execute(sa.delete(schedule_fires))
    assert reads.overview(T0, 1440) == day


def test_the_job_page_shows_each_failed_attempts_traceback_escaped_and_collapsed(any_site: Site):
    """The fire path records the traceback (its tail within the cap) with the failed attempt's
    history entry; the job page shows it in a closed <details>, escaped."""
    from schedule_sdk.core.firing import fire_record
    from schedule_sdk.domain.errors import ListenerFailed
    from schedule_sdk.domain.history import MAX_TRACEBACK_BYTES

    def send_invoice() -> None:
        raise RuntimeError("x" * 20_000 + " <script>alert(1)</script>")

    try:
        send_invoice()
    except RuntimeError as error:
        failure = ListenerFailed([error])
    job_id = any_site.one_shot()
    job = any_site.service.get_by_id(job_id).evolve(claimed_by="host-a:11:abcd")
    failed = fire_record(job, T0 - timedelta(minutes=2), T0 - timedelta(minutes=2), failure, fired=True)
    later = job.evolve(attempt=2)
    succeeded = fire_record(later, T0 - timedelta(minutes=1), T0 - timedelta(minutes=1), None, fired=True)
    any_site.fires(failed, succeeded)

    second, first = any_site.service.history(job_id)
    assert second.traceback is None
    assert first.traceback == failed.traceback and first.traceback is not None
    assert len(first.traceback.encode()) <= MAX_TRACEBACK_BYTES < 20_000
    assert first.traceback.startswith("[... ")
    assert first.traceback.rstrip().endswith("<script>alert(1)</script>")
    html = any_site.client().get(f"/jobs/{job_id}").text
    shown = re.findall(r'<details class="traceback"><summary>Traceback</summary><pre class="error">', html)
    assert len(shown) == 1  # one failed attempt; closed (no "open")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert "bytes cut ...]" in html


def test_concurrency_keys_show_on_the_job_page_the_workers_page_and_survive_the_reschedule_form(
    any_site: Site,
):
    limit = ConcurrencyLimit(key="reports:acme", limit=2)
    job_id = any_site.one_shot(run_at=T0 + timedelta(hours=2), concurrency=limit)
    waiting = [any_site.one_shot(run_at=T0 + timedelta(seconds=3 - n), concurrency=limit) for n in range(3)]
    any_site.clock.advance(10)
    now = any_site.clock.now()
    claimed = any_site.store.claim_due(now, 10, "worker-1", now + timedelta(minutes=1))
    assert sorted(j.id for j in claimed) == sorted(waiting[1:])  # the two earliest; one waits
    client = any_site.client(auth=lambda request: True)
    assert "key reports:acme, at most 2 at once" in client.get(f"/jobs/{job_id}").text
    keys = client.get("/workers").text
    row = re.search(r'<tr class="key-row">(.*?)</tr>', keys, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert cells[:4] == ["reports:acme", "2", "2", "1"]  # key, limit, running, waiting
    page = client.get(f"/jobs/{job_id}/reschedule")
    moved = client.post(
        f"/jobs/{job_id}/reschedule",
        data={"csrf": csrf_of(page.text), "run_at": "2030-03-05T08:30:00"},
        follow_redirects=False,
    )
    assert moved.status_code == 303
    new_id = moved.headers["location"].split("/")[-1].split("?")[0]
    assert any_site.service.get_by_id(new_id).concurrency == limit


def test_the_job_page_shows_the_overlap_policy_and_reschedule_keeps_or_changes_it(site: Site):
    client = site.client(auth=lambda request: True)
    spec = RepeatSpec(
        topic="dash.test", timezone="UTC", repeat=IntervalRepeat(every_ms=60_000), overlap="skip"
    )
    job = site.service.schedule_repeat(spec)
    page = client.get(f"/jobs/{job.id}").text
    assert re.search(r"<dt>Overlap</dt><dd[^>]*>skip</dd>", page)
    form = client.get(f"/jobs/{job.id}/reschedule").text
    assert '<option value="skip" selected>' in form

    def reschedule(target: str, **fields: str):
        data = {"csrf": csrf_page(client, f"/jobs/{target}/reschedule"), **fields}
        return client.post(f"/jobs/{target}/reschedule", data=data, follow_redirects=False)

    def new_id(response) -> str:
        return response.headers["location"].split("/")[-1].split("?")[0]

    kept = site.service.get_by_id(new_id(reschedule(job.id, every_seconds="90")))
    assert kept.overlap == "skip" and kept.repeat == IntervalRepeat(every_ms=90_000)
    changed = site.service.get_by_id(new_id(reschedule(kept.id, every_seconds="90", overlap="buffer_one")))
    assert changed.overlap == "buffer_one"
    bad = reschedule(changed.id, every_seconds="90", overlap="sometimes")
    assert bad.status_code == 400 and "SCHEDULE_INVALID_OVERLAP" in bad.text
    assert site.service.get_by_id(changed.id).status is JobStatus.PENDING  # nothing written
    cleared = site.service.get_by_id(new_id(reschedule(changed.id, every_seconds="90", overlap="")))
    assert cleared.overlap is None
    assert "none (the misfire policy decides)" in client.get(f"/jobs/{cleared.id}").text


def test_a_runs_page_names_the_job_it_runs_for_and_shows_that_occurrences_fires(site: Site):
    client = site.client(auth=lambda request: True)
    spec = RepeatSpec(
        topic="dash.test", timezone="UTC", repeat=IntervalRepeat(every_ms=60_000), overlap="allow"
    )
    job = site.service.schedule_repeat(spec)
    assert re.search(r"<dt>Overlap</dt><dd[^>]*>allow</dd>", client.get(f"/jobs/{job.id}").text)
    assert '<option value="allow" selected>' in client.get(f"/jobs/{job.id}/reschedule").text
    run = job.evolve(occurrence=2).run_for("01900000-0000-7000-8000-0000000000b2", T0)
    with site.store.transaction() as tx:
        tx.insert(run)
    site.fires(
        fire(job.id, T0 - timedelta(minutes=2), occurrence=1, worker_id="w-one"),
        fire(job.id, T0 - timedelta(minutes=1), occurrence=2, worker_id="w-two"),
    )
    page = client.get(f"/jobs/{run.id}").text
    assert re.search(rf'<dd id="run-of">run of <a class="mono" href="[^"]*/jobs/{job.id}">', page)
    history = page.split('id="history"')[1]
    assert "w-two" in history and "w-one" not in history  # the job's entries of the run's occurrence
    parent_page = client.get(f"/jobs/{job.id}").text
    assert 'id="run-of"' not in parent_page and "w-one" in parent_page and "w-two" in parent_page


def test_the_job_page_shows_the_time_limit_and_the_reschedule_form_changes_it(site: Site):
    client = site.client(auth=lambda request: True)
    job_id = site.one_shot(run_at=T0 + timedelta(hours=2), time_limit=timedelta(seconds=90))
    site.fires(
        fire(job_id, T0 - timedelta(minutes=1), outcome=FireOutcome.TIMEOUT, error="ListenerTimedOut: x")
    )
    page = client.get(f"/jobs/{job_id}").text
    assert '<dt>Time limit</dt><dd class="mono">90 s</dd>' in page and "timeout" in page
    form = client.get(f"/jobs/{job_id}/reschedule").text
    assert 'name="time_limit_seconds" value="90"' in form

    def reschedule(target: str, **fields: str):
        data = {"csrf": csrf_page(client, f"/jobs/{target}/reschedule"), **fields}
        return client.post(f"/jobs/{target}/reschedule", data=data, follow_redirects=False)

    kept = reschedule(job_id, run_at="2030-03-05T08:30:00", time_limit_seconds="2.5")
    new_id = kept.headers["location"].split("/")[-1].split("?")[0]
    assert site.service.get_by_id(new_id).time_limit == timedelta(milliseconds=2500)
    for bad in ("0", "-1", "abc", "604801", "0.0001"):
        refused = reschedule(new_id, run_at="2030-03-05T08:30:00", time_limit_seconds=bad)
        assert refused.status_code == 400 and "SCHEDULE_INVALID_TIME_LIMIT" in refused.text, bad
        assert site.service.get_by_id(new_id).status is JobStatus.PENDING  # nothing written
    cleared = reschedule(new_id, run_at="2030-03-05T08:30:00", time_limit_seconds="")
    assert site.service.get_by_id(cleared.headers["location"].split("/")[-1].split("?")[0]).time_limit is None


def test_a_notice_row_is_named_as_one_in_the_jobs_list_and_on_its_page(any_site: Site):
    from schedule_sdk.core.give_up import failed_event, failed_notice

    failed = any_site.service.get_by_id(any_site.one_shot())
    assert failed is not None
    event = failed_event(failed, T0, ValueError("no"), None, T0)
    notice = failed_notice(failed, event, T0)
    with any_site.store.transaction() as tx:  # as a give-up writes it
        tx.insert(notice)
    client = any_site.client()
    rows = dict(
        re.findall(r'<tr class="job-row" data-job-id="([^"]+)">(.*?)</tr>', client.get("/jobs").text, re.S)
    )
    roles = {
        job_id: re.findall(r'<span class="note notice"[^>]*>([^<]+)<', row) for job_id, row in rows.items()
    }
    assert roles == {failed.id: [], notice.id: ["(notice: schedule.failed)"]}
    assert 'id="job-notice"' in client.get(f"/jobs/{notice.id}").text
    assert 'id="job-notice"' not in client.get(f"/jobs/{failed.id}").text


def test_the_jobs_list_shows_the_last_outcome_beside_the_status_and_filters_by_it(any_site: Site):
    from schedule_sdk.ports import Guard

    unheard, fine, waiting = (any_site.one_shot() for _ in range(3))
    with any_site.store.transaction() as tx:  # as the fire path records them
        for job_id, outcome in ((unheard, FireOutcome.UNHEARD), (fine, FireOutcome.SUCCEEDED)):
            row = any_site.service.get_by_id(job_id)
            assert row is not None
            done = row.evolve(status=JobStatus.COMPLETED, last_outcome=outcome)
            assert tx.update(done, Guard(frozenset({JobStatus.PENDING})))
    client = any_site.client()
    page = client.get("/jobs").text
    assert set(re.findall(r'data-job-id="([^"]+)"', page)) == {unheard, fine, waiting}
    rows = dict(re.findall(r'<tr class="job-row" data-job-id="([^"]+)">(.*?)</tr>', page, re.S))
    notes = {
        job_id: re.findall(r'<span class="note outcome"[^>]*>([^<]+)<', row) for job_id, row in rows.items()
    }
    assert notes == {unheard: ["(unheard)"], fine: [], waiting: []}  # a success, or no fire yet: nothing
    assert all(f'<option value="{o.value}"' in page for o in FireOutcome)  # every outcome offered
    filtered = client.get("/jobs?outcome=unheard").text
    assert re.findall(r'data-job-id="([^"]+)"', filtered) == [unheard]
    assert re.findall(
        r'data-job-id="([^"]+)"', client.get("/jobs?status=completed&outcome=succeeded").text
    ) == [fine]
    assert client.get("/jobs?outcome=deaf").status_code == 400
    assert (
        'id="job-outcome" title="how its last attempt ended">(unheard)<'
        in client.get(f"/jobs/{unheard}").text
    )
