"""Take the dashboard screenshots in docs/images/ (overview and jobs pages) from the browser
tests' demo data, with Debian's Chromium driven by Playwright.

Run:  .venv/bin/python scripts/dashboard_screenshots.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.integration.dashboard.demo import CHROMIUM, DashboardServer, populate  # noqa: E402

IMAGES = ROOT / "docs" / "images"


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        demo = populate(f"sqlite:///{folder}/jobs.db")
        server = DashboardServer(demo.url, Path(folder) / "dashboard.log")
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1240, "height": 800}, device_scale_factor=1)
                page.goto(server.base + "/")
                page.screenshot(path=str(IMAGES / "dashboard-overview.png"), full_page=True)
                page.goto(server.base + "/jobs")
                page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
                page.screenshot(path=str(IMAGES / "dashboard-jobs.png"))
                browser.close()
        finally:
            server.stop()
    print(f"wrote {IMAGES / 'dashboard-overview.png'} and {IMAGES / 'dashboard-jobs.png'}")


if __name__ == "__main__":
    main()
