"""The "Next 24 h" page: what fires next, from ``ScheduleService.upcoming``, hour by hour, with
DST marks, paused jobs marked, code-owned schedules named, and the tenant scope respected."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedule_sdk import CronRepeat, IntervalRepeat, JobMetadata, RepeatSpec
from schedule_sdk.adapters.sql.declared import SQLAlchemyDeclaredRows
from schedule_sdk.core.upcoming import encode_cursor
from schedule_sdk.dashboard import TenantScope
from schedule_sdk.domain.declared import StoredDeclaration

from .conftest import Site

#: The day before Europe/Berlin springs forward (2030-03-31 02:00 -> 03:00).
EVE = datetime(2030, 3, 30, 12, 0, tzinfo=UTC)


def seed(site: Site) -> dict[str, str]:
    """A Berlin cron whose 02:30 does not exist tomorrow, a paused interval of tenant acme, a
    one-shot of tenant other due in 2 h, one due in 30 h (outside the window), and the cron marked
    as declared in code."""
    site.clock.set(EVE)
    cron = site.service.schedule_repeat(
        RepeatSpec(
            topic="dash.nightly",
            timezone="Europe/Berlin",
            repeat=CronRepeat(expression="30 2 * * *"),
            metadata=JobMetadata(tenant_id="acme"),
        )
    ).id
    interval = site.service.schedule_repeat(
        RepeatSpec(
            topic="dash.poll",
            timezone="UTC",
            repeat=IntervalRepeat(every_ms=6 * 3_600_000),
            metadata=JobMetadata(tenant_id="acme"),
        )
    ).id
    site.service.pause(interval)
    soon = site.one_shot(
        topic="dash.soon", run_at=EVE + timedelta(hours=2), metadata=JobMetadata(tenant_id="other")
    )
    late = site.one_shot(topic="dash.late", run_at=EVE + timedelta(hours=30))
    rows = SQLAlchemyDeclaredRows(site.store.engine)
    with site.store.transaction() as tx:
        rows.put(
            tx,
            [
                StoredDeclaration(
                    name="app.nightly",
                    job_id=cron,
                    kind="cron",
                    fingerprint="f" * 64,
                    spec="{}",
                    version=0,
                    synced_at=EVE,
                )
            ],
        )
    return {"cron": cron, "interval": interval, "soon": soon, "late": late}


def rows_of(html: str) -> list[tuple[str, str]]:
    """(job id, the row's html) of each fire row, in page order."""
    return re.findall(r'<tr class="fire-row[^"]*" data-job="([^"]+)">(.*?)</tr>', html, re.S)


def test_the_page_lists_the_next_24_hours_with_dst_paused_and_code_marks(site: Site) -> None:
    ids = seed(site)
    page = site.client().get("/upcoming?view=timeline")
    assert page.status_code == 200
    rows = rows_of(page.text)
    jobs = [job for job, _ in rows]
    assert ids["late"] not in jobs  # due in 30 h: outside the window
    assert jobs.count(ids["cron"]) == 1 and jobs.count(ids["soon"]) == 1
    assert jobs.count(ids["interval"]) == 4  # every 6 h, paused: each of its 4 fires in the window
    cron_row = dict(rows)[ids["cron"]]
    assert "DST: moved" in cron_row and "app.nightly" in cron_row and ">code<" in cron_row
    assert "2030-03-31 01:00:00 UTC" in cron_row  # 02:30 did not exist: it fires at 03:00 CEST
    assert all("paused" in html for job, html in rows if job == ids["interval"])
    assert "paused" not in dict(rows)[ids["soon"]] and ">code<" not in dict(rows)[ids["soon"]]
    fire_times = re.findall(r'<td class="mono">(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)</td>', page.text)
    assert fire_times == sorted(fire_times)
    assert "2030-03-30 14:00 UTC" in page.text  # an hour heading of the timeline


def test_a_tenant_scoped_operator_sees_only_the_fires_of_their_tenants(site: Site) -> None:
    ids = seed(site)
    page = site.client(auth=lambda request: TenantScope({"other"})).get("/upcoming?view=timeline")
    assert [job for job, _ in rows_of(page.text)] == [ids["soon"]]
    both = site.client(auth=lambda request: TenantScope({"other", "acme"})).get("/upcoming?view=timeline")
    jobs = [job for job, _ in rows_of(both.text)]
    assert set(jobs) == {ids["soon"], ids["cron"], ids["interval"]}


def test_the_page_is_read_only_and_says_when_nothing_fires(site: Site) -> None:
    site.clock.set(EVE)
    page = site.client(token="a-long-enough-operator-token-0123456789").get("/upcoming?view=timeline")
    assert 'id="upcoming-empty"' in page.text
    assert site.client().post("/upcoming").status_code == 405


def seed_day(site: Site) -> dict[str, str]:
    """A 2 s interval of owner ops, an hourly cron of tenant acme and a one-shot in 23 h."""
    site.clock.set(EVE)
    fast = site.service.schedule_repeat(
        RepeatSpec(
            topic="day.fast",
            timezone="UTC",
            repeat=IntervalRepeat(every_ms=2000),
            metadata=JobMetadata(owner_id="ops"),
        )
    ).id
    hourly = site.service.schedule_repeat(
        RepeatSpec(
            topic="day.hourly",
            timezone="UTC",
            repeat=CronRepeat(expression="15 * * * *"),
            metadata=JobMetadata(tenant_id="acme"),
        )
    ).id
    once = site.one_shot(topic="day.once", run_at=EVE + timedelta(hours=23))
    return {"fast": fast, "hourly": hourly, "once": once}


def job_rows_of(html: str) -> dict[str, str]:
    return dict(re.findall(r'<tr class="job-row[^"]*" data-job="([^"]+)">(.*?)</tr>', html, re.S))


def count_of(row: str) -> str:
    return re.findall(r'<td class="mono count">([^<]*)</td>', row)[0]


def test_the_page_groups_the_whole_day_by_job_with_each_jobs_count(any_site: Site) -> None:
    ids = seed_day(any_site)
    page = any_site.client().get("/upcoming")
    assert page.status_code == 200
    rows = job_rows_of(page.text)
    assert list(rows) == [ids["fast"], ids["hourly"], ids["once"]]  # by first fire
    assert count_of(rows[ids["fast"]]) == "43,200"  # every 2 s for 24 h: all of it, counted
    assert count_of(rows[ids["hourly"]]) == "24" and count_of(rows[ids["once"]]) == "1"
    assert "2030-03-30 12:00:04 UTC" in rows[ids["fast"]]  # its next fires after the first
    assert "3 job(s), 43,225 fire(s)" in page.text and 'id="upcoming-truncated"' not in page.text


def test_the_page_filters_by_topic_owner_and_tenant_within_the_scope(any_site: Site) -> None:
    ids = seed_day(any_site)
    client = any_site.client()
    assert list(job_rows_of(client.get("/upcoming?topic=day.once").text)) == [ids["once"]]
    assert list(job_rows_of(client.get("/upcoming?owner=ops").text)) == [ids["fast"]]
    assert list(job_rows_of(client.get("/upcoming?tenant=acme").text)) == [ids["hourly"]]
    scoped = any_site.client(auth=lambda request: TenantScope({"acme"}))
    assert list(job_rows_of(scoped.get("/upcoming").text)) == [ids["hourly"]]
    assert job_rows_of(scoped.get("/upcoming?tenant=other").text) == {}
    refused = client.get("/upcoming?topic=a%00b")
    assert refused.status_code == 400 and 'id="upcoming-error"' in refused.text


def test_the_timeline_says_it_was_cut_and_pages_on(any_site: Site) -> None:
    ids = seed_day(any_site)
    client = any_site.client()
    first = client.get("/upcoming?view=timeline")
    rows = rows_of(first.text)
    assert len(rows) == 500
    assert "Showing 500 of 43,225 fires" in first.text
    link = re.findall(r'<a id="upcoming-next" href="([^"]+)">', first.text)[0].replace("&amp;", "&")
    times = re.findall(r'<td class="mono">(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)</td>', first.text)
    second = client.get("/upcoming" + link)
    later = re.findall(r'<td class="mono">(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)</td>', second.text)
    assert len(rows_of(second.text)) == 500 and later[0] > times[-1]
    assert "Showing 500 of 42,725 fires" in second.text
    assert {job for job, _ in rows_of(second.text)} <= {ids["fast"], ids["hourly"]}


#: Cursors of well-formed text naming instants at the edges of what a datetime holds.
EDGE_CURSORS = [
    encode_cursor((datetime.fromisoformat(at), "01900000-0000-7000-8000-000000000001"))
    for at in ("0001-01-01T00:00:00+14:00", "0001-01-01T00:00:00+00:00", "9999-12-31T23:59:59-05:00")
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    params=st.dictionaries(
        st.sampled_from(["view", "topic", "owner", "tenant", "cursor"]),
        st.one_of(
            st.text(max_size=40),
            st.text(alphabet=st.sampled_from(["\x00", "\ud800", "%", "|", "=", "<", "é", "9"]), max_size=20),
            st.sampled_from(["MjAyNi0xMi0wM1QxOToxNTozNXx4", "x" * 5000, "timeline", "jobs", *EDGE_CURSORS]),
        ),
        max_size=4,
    )
)
def test_the_page_answers_any_query_string(site: Site, params: dict[str, str]) -> None:
    query = "&".join(f"{quote(k)}={quote(v, safe='', errors='surrogatepass')}" for k, v in params.items())
    response = site.client().get("/upcoming?" + query)
    assert response.status_code in (200, 400), (params, response.status_code)
    if response.status_code == 400:
        assert "SCHEDULE_" in response.text


def test_a_cursor_at_the_edges_of_time_is_a_refusal_or_a_page(site: Site) -> None:
    seed_day(site)
    for cursor in EDGE_CURSORS:
        response = site.client().get(f"/upcoming?view=timeline&cursor={cursor}")
        assert response.status_code in (200, 400), cursor
