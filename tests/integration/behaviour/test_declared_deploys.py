"""A deploy of declared schedules is legible: the sync logs one line per added, changed or removed
schedule with what changed (nothing when nothing did), ``schedules plan`` shows the field-level
diff in text and JSON, and a changed schedule's history joins the fires of its old and new rows."""

from __future__ import annotations

import json
import logging

import pytest

from schedule_sdk.dashboard import create_dashboard
from schedule_sdk.entrypoints.cli import main
from tests.conftest import COMBINATIONS, Backend
from tests.harness import Harness
from tests.integration.dashboard.conftest import Client

V1 = "tests.support.declared_v1"
V2 = "tests.support.declared_v2"
LOGGER = "schedule_sdk.core.declared"

#: Both stores, on the sql substrate (what is tested is the store's rows and the sync's output).
pytestmark = pytest.mark.parametrize(
    "backend_combination", [p for p in COMBINATIONS if p.id in ("sqlite-sql", "postgres-sql")], indirect=True
)


def app(backend: Backend, module: str) -> Harness:
    return backend.harness(listener_modules=[module])


def sync_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.INFO]


def test_the_sync_logs_one_line_per_added_changed_or_removed_schedule_and_nothing_for_no_change(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    app(backend, V1).container.declared_sync().apply()
    added = sync_lines(caplog)
    assert len(added) == 4, added
    tick = next(line for line in added if line.startswith("schedule app.tick added: "))
    assert "interval 700ms" in tick and "zone UTC" in tick and 'payload {"v": 1}' in tick
    report = next(line for line in added if line.startswith("schedule app.report added: "))
    assert "cron '0 9 * * 1-5'" in report and "zone Europe/Berlin" in report
    caplog.clear()
    app(backend, V1).container.declared_sync().apply()
    assert sync_lines(caplog) == []  # nothing changed: nothing said
    caplog.clear()
    app(backend, V2).container.declared_sync().apply()
    lines = sync_lines(caplog)
    assert len(lines) == 4, lines  # tick and report changed, audit added, cleanup removed
    assert any(
        line.startswith("schedule app.report changed: cron '0 9 * * 1-5' \u2192 '30 10 * * 1-5', ")
        and 'payload {"v": 1} \u2192 {"v": 2}' in line
        for line in lines
    ), lines
    assert any(
        line.startswith("schedule app.tick changed: interval 700ms \u2192 1.1s, payload") for line in lines
    ), lines
    assert any(line.startswith("schedule app.cleanup removed: job ") for line in lines), lines
    assert any(line.startswith("schedule app.audit added: cron '0 3 * * *'") for line in lines), lines


def test_plan_shows_the_field_level_diff_in_text_and_json(
    backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    app(backend, V1).container.declared_sync().apply()
    url = backend.database_url
    assert main(["--database-url", url, "schedules", "plan", "--listeners", V2]) == 0
    text = capsys.readouterr().out
    assert "      interval 700ms \u2192 1.1s\n" in text
    assert "      cron '0 9 * * 1-5' \u2192 '30 10 * * 1-5'\n" in text
    assert '      payload {"v": 1} \u2192 {"v": 2}\n' in text
    assert main(["--database-url", url, "schedules", "plan", "--listeners", V2, "--json"]) == 0
    items = {i["name"]: i for i in json.loads(capsys.readouterr().out)["items"]}
    assert {c["field"]: (c["before"], c["after"]) for c in items["app.tick"]["changes"]} == {
        "interval": (700, 1100),
        "payload": ({"v": 1}, {"v": 2}),
    }
    assert items["app.warmup"]["changes"] == []
    assert {c["field"] for c in items["app.cleanup"]["changes"]} >= {"kind", "interval"}


def test_a_changed_schedule_keeps_one_history_across_its_rows(
    backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    old = app(backend, V1).start()
    [first] = old.service.list(topic="app.tick", limit=10).items
    old.wait_events(first.id, 2)
    old.stop()
    new = app(backend, V2)
    new.container.declared_sync().apply()
    [replaced] = new.service.list(topic="app.tick", status=["pending", "active"], limit=10).items
    assert replaced.id != first.id and replaced.rescheduled_from == first.id
    new.start()
    new.wait_events(replaced.id, 2)
    new.stop()
    # the new row's history holds the old row's fires too, newest first; and so does the old row's
    joined = new.service.history(replaced.id, limit=50)
    assert {f.job_id for f in joined} == {first.id, replaced.id}
    assert [f.fired_at for f in joined] == sorted((f.fired_at for f in joined), reverse=True)
    assert new.service.history(first.id, limit=50) == joined
    # the dashboard's job page of the new row lists the old row's fires too
    page = Client(create_dashboard(new.container)).get(f"/jobs/{replaced.id}").text
    assert f'class="mono other-row" href="/jobs/{first.id}"' in page
    # the CLI's job view shows them too
    assert main(["--database-url", backend.database_url, "jobs", "show", replaced.id]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {f["job_id"] for f in shown["history"]} == {first.id, replaced.id}
