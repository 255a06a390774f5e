"""What the command line loads before it answers: ``--help``, every command's ``--help`` and
``cron`` import neither the store (SQLAlchemy) nor the container (dependency-injector), nor a web
framework. Each case runs ``main()`` in a fresh interpreter, then reads its ``sys.modules``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedule_sdk.entrypoints.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]
HEAVY = {"sqlalchemy", "alembic", "dependency_injector", "fastapi", "starlette", "uvicorn", "flask", "django"}

WRAPPER = """\
import contextlib, io, json, sys
from schedule_sdk.entrypoints.cli import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    code = main(json.loads(sys.argv[1]))
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(),
                  "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def run_main(*argv: str, env: dict[str, str] | None = None) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, json.dumps(list(argv))],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=60,
    )
    report: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def heavy(report: dict[str, object]) -> set[str]:
    modules = report["modules"]
    assert isinstance(modules, list)
    return set(modules) & HEAVY


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command and sub-command of the parser (``("jobs",)``, ``("jobs", "list")``, ...)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from command_paths(sub, (*prefix, name))


COMMANDS = sorted(command_paths(build_parser()))


def test_every_command_is_found() -> None:
    assert {
        ("worker",),
        ("jobs", "list"),
        ("cron",),
        ("timer",),
        ("schedules", "plan"),
        ("db", "upgrade"),
    } <= set(COMMANDS)


def test_help_loads_no_store_and_no_container() -> None:
    report = run_main("--help")
    assert report["code"] == 0
    assert "exit codes" in str(report["out"])
    assert heavy(report) == set()


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_each_commands_help_loads_no_store_and_no_container(command: tuple[str, ...]) -> None:
    report = run_main(*command, "--help")
    assert report["code"] == 0, report["err"]
    assert "usage:" in str(report["out"])
    assert heavy(report) == set()


def test_cron_loads_no_store_and_no_container() -> None:
    report = run_main("cron", "*/5 * * * *", "--tz", "UTC", "-n", "3")
    assert report["code"] == 0, report["err"]
    assert str(report["out"]).splitlines()[0].split() == ["LOCAL", "UTC", "NOTE"]
    assert heavy(report) == set()


def test_cron_without_a_zone_is_a_usage_error_that_loads_nothing_either() -> None:
    report = run_main("cron", "*/5 * * * *")
    assert report["code"] == 2
    assert "--tz" in str(report["err"])
    assert heavy(report) == set()


def test_a_command_that_needs_the_store_still_checks_the_url() -> None:
    report = run_main("jobs", "list", env={"SCHEDULE_DATABASE_URL": "nope://x"})
    assert report["code"] == 2
    assert str(report["err"]).startswith("schedule-sdk: error: bad database URL")
    assert "sqlalchemy" in heavy(report)
