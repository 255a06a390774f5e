"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright, against
``schedule-sdk dashboard`` running as its own process on a loopback port."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from schedule_sdk import JobStatus, ScheduleContainer, ScheduleService

from .demo import CHROMIUM, TOKEN, DashboardServer, Demo, populate


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
    assert first + second == [j.id for j in expected] and len(first) == 50
    expect(page.locator("#next-page")).to_have_count(0)


def test_open_a_job_then_cancel_and_pause_through_the_buttons(demo, page: Page, service: ScheduleService):
    data, server = demo
    page.goto(server.base + f"/jobs/{data.billing[0]}")
    expect(page.locator("[data-action]")).to_have_count(0)  # not logged in: read-only
    log_in(page, server.base)
    page.goto(server.base + "/jobs?topic=billing.invoice-due")
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
    assert dialogs == [] and page.locator("script").count() == 0


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


def test_workers_and_timers_pages_open(demo, page: Page):
    data, server = demo
    page.goto(server.base + "/workers")
    expect(page.locator("#workers")).to_contain_text("worker-1.internal")
    expect(page.locator("#workers-note")).to_be_visible()
    page.goto(server.base + "/timers")
    expect(page.locator("h1")).to_contain_text("Timers")
