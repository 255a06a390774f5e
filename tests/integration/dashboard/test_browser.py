"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright, against
``schedule-sdk dashboard`` running as its own process on a loopback port."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from playwright.sync_api import Browser, Page, expect, sync_playwright

from schedule_sdk import JobStatus, OneShotSpec, ScheduleContainer, ScheduleService
from schedule_sdk.adapters.sql.tables import schedule_jobs

from .demo import CHROMIUM, TOKEN, DashboardServer, Demo, populate

#: One pytest-xdist worker runs the module: one Chromium and one dashboard server (module fixtures).
pytestmark = pytest.mark.xdist_group("browser")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Demo, DashboardServer]]:
    folder = tmp_path_factory.mktemp("browser")
    data = populate(f"sqlite:///{folder / 'jobs.db'}")
    server = DashboardServer(data.url, folder / "dashboard.log")
    yield data, server
    # uvicorn re-raises the SIGTERM it handled once it has shut down cleanly
    assert server.stop() in (0, -signal.SIGTERM), server.process.output()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context.new_page()
    context.close()


@pytest.fixture
def service(demo) -> Iterator[ScheduleService]:
    container = ScheduleContainer()
    container.config.from_dict({"database_url": demo[0].url})
    yield container.schedule_service()
    container.shutdown_resources()


def log_in(page: Page, base: str) -> None:
    page.goto(base + "/login")
    page.fill("input[name=token]", TOKEN)
    page.click("button:has-text('Log in')")
    expect(page.locator("header .who")).to_contain_text("can act")


def row_ids(page: Page) -> list[str]:
    return page.locator("tr.job-row").evaluate_all("rows => rows.map(r => r.dataset.jobId)")


def test_filter_and_page_the_jobs_list(demo, page: Page, service: ScheduleService):
    data, server = demo
    page.goto(server.base + "/jobs")
    page.fill("input[name=topic]", "billing.invoice-due")
    page.select_option("select[name=status]", "pending")
    page.fill("input[name=tenant_id]", "acme")
    page.click("button:has-text('Filter')")
    expect(page.locator("h1")).to_contain_text("60 matching")
    first = row_ids(page)
    page.click("#next-page")
    second = row_ids(page)
    expected = service.list(topic="billing.invoice-due", tenant_id="acme", status="pending", limit=500).items
    assert first + second == [j.id for j in reversed(expected)] and len(first) == 50  # newest first
    expect(page.locator("#next-page")).to_have_count(0)


def test_open_a_job_then_cancel_and_pause_through_the_buttons(demo, page: Page, service: ScheduleService):
    data, server = demo
    page.goto(server.base + f"/jobs/{data.billing[0]}")
    expect(page.locator("[data-action]")).to_have_count(0)  # not logged in: read-only
    log_in(page, server.base)
    page.goto(server.base + "/jobs?topic=billing.invoice-due&order=asc")
    page.click(f"a:has-text('{data.billing[0]}')")
    expect(page.locator("#payload")).to_contain_text("INV-1000")
    page.click("[data-action=cancel]")
    expect(page.locator("h1")).to_contain_text("Cancel job")
    assert service.get_by_id(data.billing[0]).status is JobStatus.PENDING  # only asked so far
    page.click("#confirm")
    expect(page.locator("#job-status")).to_have_text("cancelled")
    assert service.get_by_id(data.billing[0]).status is JobStatus.CANCELLED

    page.goto(server.base + f"/jobs/{data.billing[1]}")
    page.click("[data-action=pause]")
    page.click("text=No, go back")  # changing one's mind writes nothing
    assert service.get_by_id(data.billing[1]).status is JobStatus.PENDING
    page.click("[data-action=pause]")
    page.click("#confirm")
    expect(page.locator("#job-status")).to_have_text("paused")
    assert service.get_by_id(data.billing[1]).status is JobStatus.PAUSED
    expect(page.locator("[data-action=resume]")).to_have_count(1)


def test_a_payload_with_markup_shows_as_text(demo, page: Page, service: ScheduleService):
    data, server = demo
    mail = service.list(topic="mail.send", limit=1).items[0]
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(server.base + f"/jobs/{mail.id}")
    expect(page.locator("#payload")).to_contain_text("<script>alert('hi')</script>")
    assert dialogs == [] and page.locator("script:not([src$='/static/dashboard.js'])").count() == 0


def test_the_overview_plots_render_with_data(demo, page: Page, tmp_path: Path):
    data, server = demo
    page.goto(server.base + "/")
    assert page.locator("#plot-fires rect.bar").count() >= 55  # one bar per minute with fires
    assert page.locator("#plot-fires rect.bar-failed").count() > 0
    points = page.locator("#plot-lateness polyline.p99").get_attribute("points") or ""
    assert len(points.split()) >= 55
    assert page.locator("#plot-topics rect.topic").count() >= 2
    expect(page.locator("#plot-topics")).to_contain_text("sync.crm")
    box = page.locator("#plot-fires svg").bounding_box()
    assert box is not None and box["width"] > 600 and box["height"] > 100  # drawn, not collapsed
    page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
    assert (tmp_path / "overview.png").stat().st_size > 10_000


OUTSIDE = """svg => {
  const box = svg.viewBox.baseVal;
  return [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBBox()])
    .filter(([, b]) => b.x < box.x - 0.5 || b.y < box.y - 0.5
      || b.x + b.width > box.x + box.width + 0.5 || b.y + b.height > box.y + box.height + 0.5)
    .map(([text, b]) => `${text} at ${b.x.toFixed(1)},${b.y.toFixed(1)} width ${b.width.toFixed(1)}`);
}"""


@pytest.mark.parametrize("window", [60, 360, 1440])
def test_no_plot_label_is_cut_by_its_svg(demo, page: Page, window: int):
    """Every axis and bar label, the last x-axis one included, lies inside its plot's viewBox
    (as the browser lays it out: anything outside is cut)."""
    page.goto(demo[1].base + f"/?window={window}")
    for plot in ("#plot-fires svg", "#plot-lateness svg", "#plot-topics svg"):
        svg = page.locator(plot)
        assert svg.locator("text").count() >= 2, plot
        assert svg.evaluate(OUTSIDE) == [], plot


def test_workers_and_timers_pages_open(demo, page: Page):
    data, server = demo
    page.goto(server.base + "/workers")
    expect(page.locator("#workers")).to_contain_text("worker-1.internal")
    expect(page.locator("#workers-note")).to_be_visible()
    page.goto(server.base + "/timers")
    expect(page.locator("h1")).to_contain_text("Timers")


def test_search_sort_and_the_alarm(demo, page: Page, service: ScheduleService):
    data, server = demo
    page.goto(server.base + "/jobs")
    expect(page.locator("#alarm")).to_contain_text("No live worker")  # nobody runs a worker here
    page.fill("input[name=q]", "INV-1007")
    page.click("button:has-text('Filter')")
    assert row_ids(page) == [data.billing[7]]
    page.goto(server.base + "/jobs?topic=billing.invoice-due&status=pending")
    page.select_option("select[name=sort]", "due")
    page.click("button:has-text('Filter')")
    due = [service.get_by_id(i).run_at for i in row_ids(page)]
    assert due == sorted(due) and len(due) == 50


def test_bulk_pause_with_one_confirmation(demo, page: Page, service: ScheduleService):
    data, server = demo
    log_in(page, server.base)
    page.goto(server.base + "/jobs?topic=mail.send")
    picked = row_ids(page)[:2]
    for job_id in picked:
        page.check(f"input.pick[value='{job_id}']")
    expect(page.locator("#live-state")).to_contain_text("paused")  # a selection pauses the refresh
    page.click("[data-bulk=pause]")
    expect(page.locator("h1")).to_contain_text("Pause 2 job(s)?")
    assert all(service.get_by_id(j).status is JobStatus.PENDING for j in picked)  # only asked so far
    page.click("#confirm")
    expect(page.locator("h1")).to_contain_text("2 of 2 done")
    assert all(service.get_by_id(j).status is JobStatus.PAUSED for j in picked)


def test_live_refresh_brings_new_jobs_and_pauses_while_reading(demo, page: Page, service: ScheduleService):
    data, server = demo
    page.goto(server.base + "/jobs?topic=live.refresh")
    expect(page.locator("tr.job-row")).to_have_count(0)
    page.mouse.move(0, 0)  # off the page's content: not reading
    job = service.schedule_at(
        OneShotSpec(topic="live.refresh", run_at=datetime.now(UTC) + timedelta(days=1), timezone="UTC")
    )
    expect(page.locator(f"tr.job-row[data-job-id='{job.id}']")).to_have_count(1, timeout=15_000)
    page.fill("input[name=owner_id]", "typing")  # a focused field pauses it
    expect(page.locator("#live-state")).to_contain_text("paused", timeout=10_000)
    assert page.input_value("input[name=owner_id]") == "typing"  # what the operator typed stays


def test_reschedule_a_one_shot_in_another_zone_with_a_new_payload(demo, page: Page, service: ScheduleService):
    data, server = demo
    log_in(page, server.base)
    page.goto(server.base + f"/jobs/{data.billing[20]}/reschedule")
    page.fill("input[name=zone]", "Asia/Tokyo")
    page.fill("input[name=run_at]", "2031-01-02T09:15:00")
    page.fill("textarea[name=payload]", '{"invoice": "INV-9999"}')
    page.click("#confirm")
    expect(page.locator("#payload")).to_contain_text("INV-9999")
    new_id = page.url.split("/jobs/")[1].split("?")[0]
    new = service.get_by_id(new_id)
    assert new.timezone == "Asia/Tokyo" and new.run_at == datetime(2031, 1, 2, 0, 15, tzinfo=UTC)


def test_the_next_24_hours_timeline_from_the_nav(demo, page: Page, service: ScheduleService):
    data, server = demo
    page.goto(server.base + "/")
    page.click("header nav a:has-text('Next 24 h')")
    expect(page.locator("h1")).to_contain_text("Next 24 h")
    expect(page.locator("header nav a.on")).to_have_text("Next 24 h")
    # grouped by job (the page's default): one row per job, with its count of fires in the window
    grouped = page.locator("tr.job-row", has_text="reports.nightly")
    expect(grouped).to_have_count(1)
    expect(grouped.locator("td.count")).to_have_text("1")  # a daily cron: one fire in 24 h
    crm_count = page.locator("tr.job-row", has_text="sync.crm").locator("td.count").inner_text()
    assert int(crm_count.replace(",", "").rstrip("+")) >= 280  # every 5 minutes: 287 or 288
    page.goto(server.base + "/upcoming?view=timeline")  # hour by hour
    nightly = page.locator("tr.fire-row", has_text="reports.nightly")
    expect(nightly).to_have_count(1)  # a daily cron: one fire in 24 h, in Berlin time
    expect(nightly).to_contain_text("CE")
    crm = page.locator("tr.fire-row", has_text="sync.crm")
    assert crm.count() >= 280  # every 5 minutes: 287 or 288 fires in the window
    hours = page.locator("tr.hour").all_inner_texts()
    assert 24 <= len(hours) <= 25 and hours == sorted(hours)


def test_bulk_pause_of_every_job_a_filter_matches(demo, page: Page, service: ScheduleService):
    data, server = demo
    later = datetime.now(UTC) + timedelta(days=2)
    made = [
        service.schedule_at(OneShotSpec(topic="bulk.browser", run_at=later, timezone="UTC")).id
        for _ in range(60)
    ]
    log_in(page, server.base)
    page.goto(server.base + "/jobs?topic=bulk.browser")
    expect(page.locator("#bulk-matching")).to_contain_text("With all 60 matching")
    assert len(row_ids(page)) == 50  # one page shows 50; the action covers all 60
    page.click("[data-bulk-matching=pause]")
    expect(page.locator("#bulk-question")).to_have_text("Pause all 60 matching job(s)?")
    assert {service.get_by_id(j).status for j in made} == {JobStatus.PENDING}  # only asked so far
    page.click("#confirm")
    expect(page.locator("#bulk-done")).to_have_text("Pause: 60 done")
    assert {service.get_by_id(j).status for j in made} == {JobStatus.PAUSED}


def test_error_search_header_sorting_login_return_and_icon(demo, page: Page, service: ScheduleService):
    data, server = demo
    later = datetime.now(UTC) + timedelta(days=3)
    spec = OneShotSpec(topic="crm.browser", run_at=later, timezone="UTC")
    failed = [service.schedule_at(spec).id for _ in range(3)]
    engine = sa.create_engine(data.url)
    with engine.begin() as conn:  # as the fire path leaves a job whose attempts ran out
        conn.execute(
            sa.update(schedule_jobs)
            .where(schedule_jobs.c.id.in_(failed))
            .values(status="failed", last_error="ListenerFailed: ConnectionError: connection refused")
        )
    engine.dispose()
    page.goto(server.base + "/jobs")
    page.fill("input[name=q]", "ConnectionError")
    page.click("button:has-text('Filter')")
    assert sorted(row_ids(page)) == sorted(failed)

    page.goto(server.base + "/jobs?topic=billing.invoice-due&status=pending")
    page.click("th a[data-sort=due]")
    expect(page.locator("th a[data-sort=due]")).to_contain_text("▲")
    due = [service.get_by_id(i).run_at for i in row_ids(page)]
    assert due == sorted(due) and len(due) == 50
    assert "topic=billing.invoice-due" in page.url and "status=pending" in page.url  # filters kept
    page.click("th a[data-sort=due]")
    expect(page.locator("th a[data-sort=due]")).to_contain_text("▼")
    due = [service.get_by_id(i).run_at for i in row_ids(page)]
    assert due == sorted(due, reverse=True)

    page.goto(server.base + "/jobs?topic=mail.send&status=pending")
    page.click("#login-link")
    page.fill("input[name=token]", TOKEN)
    page.click("button:has-text('Log in')")
    expect(page.locator("header .who")).to_contain_text("can act")
    assert page.url == server.base + "/jobs?topic=mail.send&status=pending"

    icon = page.request.get(server.base + "/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/x-icon"
    assert page.locator("link[rel=icon]").get_attribute("href") == "/favicon.ico"
