"""Spread, jitter and calendars on the dashboard: the job page names them, its preview and the
"Next 24 h" page show each spread fire with its nominal time and mark excluded ones, and a
reschedule through the form keeps them."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from schedule_sdk import Calendar, CronRepeat, RepeatSpec

from .conftest import Site
from .test_pages import csrf_page

#: A Friday: the next five 09:00 fires are Fri, Sat (excluded), Sun (excluded), Mon, Tue.
FRIDAY = datetime(2030, 3, 1, 6, 0, tzinfo=UTC)


def weekday_report(site: Site):
    site.clock.set(FRIDAY)
    return site.service.schedule_repeat(
        RepeatSpec(
            topic="dash.report",
            timezone="UTC",
            repeat=CronRepeat(expression="0 9 * * *"),
            spread=timedelta(minutes=30),
            spread_key="acme",
            jitter=timedelta(seconds=2),
            calendar=Calendar(weekdays=["sat", "sun"], dates=[datetime(2030, 3, 5).date()]),
        )
    )


def test_the_job_page_names_the_spread_jitter_and_calendar_and_marks_the_preview(site: Site):
    job = weekday_report(site)
    html = site.client().get(f"/jobs/{job.id}").text
    assert "this job +" in html and "window 30" in html  # the spread window and this job's offset
    assert "random 0 to 2" in html and "not previewable" in html
    assert "excludes every Saturday, Sunday; 2030-03-05" in html
    items = re.findall(r"<li>(.*?)</li>", html.split('class="preview mono"')[1], re.S)
    assert len(items) == 5
    assert ["excluded</span>" in item for item in items] == [False, True, True, False, True]
    assert all("spread from" in item for item in items)
    assert "spread from 2030-03-01 09:00:00" in items[0]


def test_the_next_24_hours_page_shows_spread_and_excluded_fires(site: Site):
    job = weekday_report(site)
    site.clock.set(FRIDAY + timedelta(hours=6))  # the next 24 h hold Friday's fire and Saturday's
    html = site.client().get("/upcoming?view=timeline").text
    rows = re.findall(rf'data-job="{job.id}">(.*?)</tr>', html, re.S)
    assert len(rows) == 2
    assert all("spread from" in row for row in rows)
    assert ["pill excluded" in row for row in rows] == [False, True]
    assert "spread from 2030-03-02 09:00:00" in rows[1]


def test_a_reschedule_through_the_form_keeps_the_spread_jitter_and_calendar(site: Site):
    job = weekday_report(site)
    client = site.client(auth=lambda request: True)
    data = {"csrf": csrf_page(client, f"/jobs/{job.id}/reschedule"), "cron": "30 9 * * *"}
    moved = client.post(f"/jobs/{job.id}/reschedule", data=data, follow_redirects=False)
    assert moved.status_code == 303
    new = site.service.get_by_id(moved.headers["location"].split("/")[-1].split("?")[0])
    assert new is not None and new.repeat == CronRepeat(expression="30 9 * * *")
    assert (new.spread_ms, new.jitter_ms, new.calendar) == (job.spread_ms, job.jitter_ms, job.calendar)
