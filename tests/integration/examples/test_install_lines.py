"""Every documented install and start line runs as written, in a fresh checkout with a fresh venv.

Each test copies the working tree (the files git knows, as a clone has them) to a temporary
folder, creates the venv there and runs the doc's own lines, read from the doc (a line the test
runs must be in the doc), through bash, then checks that the started example answers. One venv
per documented extra: nothing from the test suite's own venv is on the path. The installs work
offline, from the machine's pip configuration (find-links and the local index). A bare command
(``pip``, ``schedule-sdk``) runs with the venv active, as the docs say.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.support.services import NATS_URL
from tests.support.waiting import wait_for

from .support import ROOT, example_env, free_port

pytestmark = pytest.mark.slow

DOCS = ROOT / "docs"
INSTALL_TIMEOUT = 300  # a guard against a hang only: an offline install takes seconds
# uvicorn shuts down cleanly on SIGTERM, then raises the signal again (exit -15)
STOPPED = (0, -signal.SIGTERM)


def doc_line(doc: Path, start: str) -> str:
    """The one line of ``doc`` that starts with ``start`` (leading spaces and backquotes aside)."""
    found = [
        line.strip().strip("`")
        for line in doc.read_text().splitlines()
        if line.strip().strip("`").startswith(start)
    ]
    assert len(found) == 1, f"{doc.name}: {len(found)} lines start with {start!r}"
    return found[0]


def inline_command(doc: Path, start: str) -> str:
    """The one inline-code command of ``doc`` that starts with ``start``."""
    found = set(re.findall(rf"`({re.escape(start)}[^`]*)`", doc.read_text()))
    assert len(found) == 1, f"{doc.name}: {sorted(found)}"
    return found.pop()


def without_comment(line: str) -> str:
    return line.split(" #", 1)[0].rstrip()


def checkout(tmp_path: Path) -> Path:
    """The working tree's files as a clone has them (tracked and new, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    app = tmp_path / "app"
    for rel in filter(None, listed.split("\0")):
        source = ROOT / rel
        if source.is_file():
            (app / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, app / rel)
    return app


def shell_env(app: Path, **values: str) -> dict[str, str]:
    """A user's shell in ``app``: none of the suite's SCHEDULE_* settings or venv; with ``values``."""
    env = example_env(**values)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    suite_bin = str(Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != suite_bin)
    return env


def active(app: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``app``'s venv active (``. .venv/bin/activate``)."""
    venv = app / ".venv"
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(venv)}


def sh(line: str, cwd: Path, env: dict[str, str], timeout: float = INSTALL_TIMEOUT) -> str:
    """Run ``line`` through bash; its standard output (the test fails if it exits non-zero)."""
    result = subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    shown = "\n".join(x for x in result.stderr.splitlines() if not x.startswith("WARNING: Location"))
    assert result.returncode == 0, f"{line!r} exited {result.returncode}:\n{result.stdout}\n{shown}"
    return result.stdout


class Started:
    """A documented start line running in its own session; ``stop()`` sends SIGTERM to it."""

    def __init__(self, line: str, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.line, self.log = line, log
        self._out = log.open("ab")
        self.proc = subprocess.Popen(
            ["bash", "-c", f"exec {line}"],
            cwd=cwd,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def running(self) -> None:
        assert self.proc.poll() is None, f"{self.line!r} exited:\n{self.output()}"

    def shows(self, text: str) -> bool:
        assert self.proc.poll() is None or text in self.output(), f"{self.line!r} exited:\n{self.output()}"
        return text in self.output()

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"{self.line!r} did not stop on SIGTERM:\n{self.output()}") from None
        finally:
            self._out.close()


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[Started]]:
    processes: list[Started] = []
    yield processes
    for process in processes:
        if process.proc.poll() is None:
            process.stop()


def answers(
    url: str, what: str, method: str = "GET", *, process: Started, **kwargs: object
) -> httpx.Response:
    def attempt() -> httpx.Response | None:
        process.running()  # fails at once if it exited
        try:
            response = httpx.request(method, url, timeout=5, **kwargs)  # type: ignore[arg-type]
        except httpx.TransportError:
            return None
        return response if response.status_code < 500 else None

    return wait_for(attempt, what)


def mask(line: str) -> str:
    return re.sub(r"\d+", "N", line)


def test_the_readme_and_quickstart_lines_run_the_quickstart(tmp_path: Path) -> None:
    app = checkout(tmp_path)
    env = shell_env(app)
    readme = doc_line(ROOT / "README.md", "python3 -m venv .venv")
    quickstart = DOCS / "quickstart.md"
    assert doc_line(quickstart, "python3 -m venv .venv") in readme
    assert without_comment(doc_line(quickstart, ".venv/bin/pip install")) in readme
    run = without_comment(doc_line(quickstart, ".venv/bin/python examples/quickstart.py"))
    assert run in readme
    printed = sh(readme, app, env).splitlines()  # pip's lines, then the quickstart's
    output = printed[next(i for i, line in enumerate(printed) if line.startswith("scheduled;")) :]
    assert output[-1] == "done"
    # The quickstart's expected output has the lines a run prints ("times differ"); a run whose
    # next minute is within 8 s prints the cron job's fire instead of its cancellation.
    text = quickstart.read_text()
    expected = text[text.index("Expected output") :].split("```text\n", 1)[1].split("```", 1)[0]
    shown = {mask(line) for line in expected.splitlines()}
    masked = [mask(line) for line in output if " demo.cron " not in line]
    assert [line for line in masked if line not in shown] == []
    cancelled = "cancelled the cron job (next minute is more than 8 s away)"
    assert cancelled in expected and "demo.cron" in text[text.index("Expected output") :]


def test_the_fastapi_howto_lines_run_the_example(tmp_path: Path, started: list[Started]) -> None:
    doc = DOCS / "howto" / "fastapi.md"
    app = checkout(tmp_path)
    env = shell_env(app)
    sh(doc_line(DOCS / "quickstart.md", "python3 -m venv .venv"), app, env)
    sh(doc_line(doc, ".venv/bin/pip install"), app, env)
    port = free_port()
    server = Started(
        doc_line(doc, ".venv/bin/python -m examples.fastapi_app"),
        app,
        {**env, "PORT": str(port)},
        tmp_path / "fastapi.log",
    )
    started.append(server)
    due = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
    body = {"user_id": "u-1", "message": "stand up", "due_at": due, "timezone": "Europe/Paris"}
    created = answers(f"http://127.0.0.1:{port}/reminders", "the app", "POST", process=server, json=body)
    assert created.status_code == 201, created.text

    def sent() -> list[object] | None:
        items = httpx.get(f"http://127.0.0.1:{port}/sent", timeout=5).json()
        return items or None

    wait_for(sent, "the reminder sent by the app's worker")
    assert server.stop() in STOPPED, server.output()
    assert "Application shutdown complete." in server.output()


def test_the_django_howto_lines_run_the_example(tmp_path: Path, started: list[Started]) -> None:
    doc = DOCS / "howto" / "django.md"
    app = checkout(tmp_path)
    env = shell_env(app)
    sh(doc_line(DOCS / "quickstart.md", "python3 -m venv .venv"), app, env)
    sh(doc_line(doc, ".venv/bin/pip install"), app, env)
    assert doc_line(doc, "cd ") == "cd examples/django_app"
    project = app / "examples" / "django_app"
    python = "../../.venv/bin/python manage.py"
    sh(doc_line(doc, f"{python} migrate"), project, env)
    port = free_port()
    runserver = without_comment(doc_line(doc, f"{python} runserver"))
    server = Started(f"{runserver} 127.0.0.1:{port} --noreload", project, env, tmp_path / "runserver.log")
    worker = Started(
        without_comment(doc_line(doc, f"{python} schedule_worker")), project, env, tmp_path / "worker.log"
    )
    started.extend([server, worker])
    due = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
    body = {"user_id": "u-1", "message": "stand up", "due_at": due, "timezone": "Europe/Paris"}
    created = answers(
        f"http://127.0.0.1:{port}/reminders", "the Django app", "POST", process=server, json=body
    )
    assert created.status_code == 201, created.text

    def sent() -> object:
        return httpx.get(f"http://127.0.0.1:{port}/sent", timeout=5).json() or None

    wait_for(sent, "the reminder sent by manage.py schedule_worker")
    assert worker.stop() == 0, worker.output()
    assert "scanned=" in sh(doc_line(doc, f"{python} schedule_reconcile"), project, env)
    sh(without_comment(doc_line(doc, f"{python} test reminders")), project, env)


def test_the_dashboard_howto_lines_serve_the_dashboard(tmp_path: Path, started: list[Started]) -> None:
    doc = DOCS / "howto" / "dashboard.md"
    app = checkout(tmp_path)
    env = shell_env(app)
    for start in ("python3 -m venv .venv", ".venv/bin/pip install"):
        sh(without_comment(doc_line(DOCS / "quickstart.md", start)), app, env)
    sh(inline_command(doc, "pip install 'schedule-sdk"), app, active(app, env))
    line = without_comment(doc_line(doc, "schedule-sdk --database-url"))
    url = re.search(r"--database-url (\S+)", line)
    assert url is not None
    port = free_port()  # a SQLite file for the doc's PostgreSQL URL (the postgres extra is another line)
    local = line.replace(url[1], f"sqlite:///{tmp_path / 'jobs.db'}") + f" --port {port}"
    dashboard = Started(local, app, active(app, env), tmp_path / "dashboard.log")
    started.append(dashboard)
    page = answers(f"http://127.0.0.1:{port}/", "the dashboard", process=dashboard)
    assert page.status_code == 200, page.text
    assert dashboard.stop() in STOPPED, dashboard.output()


@pytest.mark.nats
@pytest.mark.parametrize("start", ["schedule-sdk timer", "python -m schedule_sdk.timer"])
def test_the_timer_howto_lines_start_the_timer(tmp_path: Path, started: list[Started], start: str) -> None:
    doc = DOCS / "howto" / "timer-nats.md"
    app = checkout(tmp_path)
    env = shell_env(app)
    sh(doc_line(DOCS / "quickstart.md", "python3 -m venv .venv"), app, env)
    sh(without_comment(doc_line(doc, ".venv/bin/pip install")), app, env)
    assert doc_line(doc, ". .venv/bin/activate")
    venv = active(app, env)
    assert f"{start}" in doc_line(doc, "schedule-sdk timer")
    run = uuid.uuid4().hex[:8]
    settings = {
        "TIMER_DB_PATH": str(tmp_path / "event_service.db"),
        "TIMER_BROKER_URL": NATS_URL,
        "TIMER_METRICS_PORT": str(free_port()),
        # this run's own streams, beside the ones other tests use on the same server
        "TIMER_COMMAND_STREAM": f"DOCS_COMMANDS_{run}",
        "TIMER_COMMAND_SUBJECT": f"docs.{run}.commands",
        "TIMER_EVENT_STREAM": f"DOCS_EVENTS_{run}",
        "TIMER_EVENT_SUBJECT": f"docs.{run}.events",
    }
    for name in ("TIMER_DB_PATH", "TIMER_BROKER_URL", "TIMER_METRICS_PORT"):
        assert doc_line(doc, f"export {name}=")
    timer = Started(start, app, {**venv, **settings}, tmp_path / "timer.log")
    started.append(timer)
    wait_for(lambda: timer.shows("timer service ready") or None, "the timer's ready line")
    assert timer.stop() == 0, timer.output()
    assert "INFO" in next(line for line in timer.output().splitlines() if "timer service ready" in line)


def console_line(doc: Path, start: str) -> str:
    """The one ``$ `` line of a console block of ``doc`` whose command starts with ``start``."""
    return doc_line(doc, f"$ {start}").removeprefix("$ ")


def python_block(doc: Path, containing: str) -> str:
    """The one ``python`` block of ``doc`` that contains ``containing``."""
    blocks = [b.split("```", 1)[0] for b in doc.read_text().split("```python\n")[1:]]
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"{doc.name}: {len(found)} python blocks hold {containing!r}"
    return found[0]


def test_the_declared_schedules_howto_lines_plan_apply_and_list(tmp_path: Path) -> None:
    """The how-to's module, saved as ``myapp/schedules.py`` in the project folder, and its
    ``schedules plan/apply/list`` lines, run there as written (the default SQLite file); a changed
    declaration plans and logs what the how-to shows."""
    doc = DOCS / "howto" / "declared-schedules.md"
    app = checkout(tmp_path)
    env = shell_env(app)
    for start in ("python3 -m venv .venv", ".venv/bin/pip install"):
        sh(without_comment(doc_line(DOCS / "quickstart.md", start)), app, env)
    venv = active(app, env)
    module = python_block(doc, "@cron(")
    (app / "myapp").mkdir()
    (app / "myapp" / "__init__.py").write_text("")
    schedules = app / "myapp" / "schedules.py"
    schedules.write_text(module)
    plan, apply = (console_line(doc, f"schedule-sdk schedules {verb}") for verb in ("plan", "apply"))
    listing = console_line(doc, "schedule-sdk schedules list")

    first = sh(plan, app, venv).splitlines()
    assert sorted(line.split()[:4] for line in first[:-1]) == [
        ["+", "app.report", "cron", "add"],
        ["+", "app.tick", "every", "add"],
    ], first
    assert first[-1] == "plan (version 0): 2 add, 0 change, 0 remove, 0 stale", first
    assert sh(apply, app, venv).splitlines()[-1].startswith("applied (version 0): 2 add, 0 change")
    assert (app / "schedule_sdk.db").is_file()  # the default database, in the project folder
    listed = json.loads(sh(listing, app, venv))["items"]
    assert sorted((item["name"], item["status"]) for item in listed) == [
        ("app.report", "pending"),
        ("app.tick", "pending"),
    ]

    # the next deploy: the report at 10:30, with a new payload, as the how-to's plan shows it
    changed = module.replace('"0 9 * * 1-5"', '"30 10 * * 1-5"')
    changed = changed.replace('name="app.report", payload={"v": 1}', 'name="app.report", payload={"v": 2}')
    assert changed.count("10 * * 1-5") == 1 and '{"v": 2}' in changed
    schedules.write_text(changed)
    text = doc.read_text()
    shown = text[text.index("$ " + plan) :].split("$ ", 2)[1].splitlines()[1:]
    report = next(line for line in shown if line.startswith("~ app.report"))
    fields = shown[shown.index(report) + 1 : shown.index(report) + 3]
    second = sh(plan, app, venv).splitlines()
    at = next(i for i, line in enumerate(second) if line.startswith("~ app.report"))
    assert mask(second[at]) == mask(report), second
    assert second[at + 1 : at + 3] == fields, second
    assert second[-1] == "plan (version 0): 0 add, 1 change, 0 remove, 0 stale", second

    def applied(line: str) -> tuple[str, str]:
        done = subprocess.run(
            ["bash", "-c", line], cwd=app, env=venv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT
        )
        assert done.returncode == 0, done.stderr
        return done.stdout, done.stderr

    verbose = inline_command(doc, "schedule-sdk -v schedules apply")
    assert verbose == apply.replace("schedule-sdk ", "schedule-sdk -v ", 1)
    out, logs = applied(verbose)
    assert out.splitlines()[-1].startswith("applied (version 0): 0 add, 1 change"), out
    logged = next(line for line in text.splitlines() if line.startswith("schedule app.report changed:"))
    assert logged.split(" (job ")[0] in logs, logs
    out, logs = applied(verbose)  # nothing changed: nothing written, nothing logged
    assert out.splitlines()[-1].startswith("applied (version 0): 0 add, 0 change, 0 remove"), out
    assert "schedule app." not in logs, logs
