"""``schedule-sdk schedules plan|apply|list``: the plan writes nothing, apply writes it once,
``--json`` everywhere, and errors exit with the CLI's codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schedule_sdk.entrypoints.cli import main

V1 = "tests.support.declared_v1"
V2 = "tests.support.declared_v2"


def cli(db_url: str, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--database-url", db_url, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_apply_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    code, out, _ = cli(db, "schedules", "plan", "--listeners", V1, "--json", capsys=capsys)
    assert code == 0
    plan = json.loads(out)
    assert {i["action"] for i in plan["items"]} == {"add"} and not plan["applied"]
    code, out, _ = cli(db, "schedules", "list", "--json", capsys=capsys)
    assert code == 0 and json.loads(out) == {"items": []}  # the plan wrote nothing
    code, out, _ = cli(db, "schedules", "apply", "--listeners", V1, capsys=capsys)
    assert code == 0 and "applied (version 0): 4 add" in out
    code, out, _ = cli(db, "schedules", "plan", "--listeners", V2, capsys=capsys)
    assert code == 0
    lines = {line.split()[1]: line for line in out.splitlines() if line[:1] in "+~-! "}
    assert lines["app.tick"].startswith("~") and "->" in lines["app.tick"]
    assert lines["app.cleanup"].startswith("-") and lines["app.audit"].startswith("+")
    code, out, _ = cli(db, "schedules", "list", "--json", capsys=capsys)
    listed = json.loads(out)["items"]
    assert sorted(i["name"] for i in listed) == ["app.cleanup", "app.report", "app.tick", "app.warmup"]
    assert all(i["status"] == "pending" and i["next_fire"] for i in listed)


def test_errors_exit_with_the_cli_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    code, _, err = cli(db, "schedules", "plan", "--listeners", V1, "--bogus", capsys=capsys)
    assert code == 2
    code, _, err = cli(
        db, "schedules", "plan", "--listeners", V1, "--container", "no.such.module:c", capsys=capsys
    )
    assert code == 2 and "cannot load container" in err
    code, _, err = cli("postgresql+psycopg://postgres@127.0.0.1:1/none", "schedules", "list", capsys=capsys)
    assert code == 4 and err.startswith("schedule-sdk: error:")


def test_plan_and_apply_import_the_listeners_from_the_working_directory(tmp_path: Path) -> None:
    """Run from the project's folder as the how-to shows, through the console script (whose
    sys.path holds its own folder, not the working directory), as ``worker`` does; a module that
    cannot be imported is a usage error."""
    import os
    import subprocess
    import sys

    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "schedules.py").write_text(
        "from datetime import timedelta\n"
        "from schedule_sdk import every\n\n\n"
        '@every(timedelta(minutes=5), name="myapp.tick")\n'
        "def tick(event):\n    pass\n"
    )
    script = Path(sys.executable).with_name("schedule-sdk")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SCHEDULE_LISTENER_MODULES")}
    env["SCHEDULE_DATABASE_URL"] = f"sqlite:///{tmp_path / 'jobs.db'}"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(script), "schedules", *args]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)

    for verb, summary in (("plan", "plan (version 0): 1 add"), ("apply", "applied (version 0): 1 add")):
        result = run(verb, "--listeners", "myapp.schedules")
        assert result.returncode == 0, result.stderr
        assert summary in result.stdout and "myapp.tick" in result.stdout
    result = run("plan", "--listeners", "myapp.missing")
    assert result.returncode == 2, result
    assert result.stderr.strip().splitlines() == [
        "schedule-sdk: error: cannot import listener module 'myapp.missing': No module named 'myapp.missing'"
    ]
