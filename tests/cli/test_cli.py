"""The ``schedule-sdk`` command line: in-process through ``main()``, and as real subprocesses for
exit codes, the one-line-error rule, and the worker's signal handling."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schedule_sdk import (
    FireOutcome,
    FireRecord,
    JobMetadata,
    JobStatus,
    OneShotSpec,
    ScheduleContainer,
    ScheduleService,
)
from schedule_sdk.adapters.stores import schema
from schedule_sdk.entrypoints.cli import main

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN_ID = "01900000-0000-7000-8000-00000000dead"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture
def service(db_url: str) -> Iterator[ScheduleService]:
    container = ScheduleContainer()
    container.config.from_dict({"database_url": db_url})
    yield container.schedule_service()
    container.shutdown_resources()


def schedule(service: ScheduleService, n: int = 1, *, in_: float = 3600, **spec: object) -> list[str]:
    values: dict[str, object] = {"topic": "cli.test", "timezone": "UTC"} | spec
    run_at = datetime.now(UTC) + timedelta(seconds=in_)
    return [service.schedule_at(OneShotSpec(run_at=run_at, **values)).id for _ in range(n)]  # type: ignore[arg-type]


def cli(db_url: str, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--database-url", db_url, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schedule_sdk", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int) -> None:
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("schedule-sdk: error: "), result.stderr


# -- in-process ----------------------------------------------------------------------------------


def test_help_names_every_command_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for word in ("worker", "reconcile", "timer", "jobs", "db", "exit codes", "SCHEDULE_DATABASE_URL"):
        assert word in out
    assert main(["jobs", "list", "--help"]) == 0
    assert "--owner-id" in capsys.readouterr().out


def test_a_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs"]) == 2
    assert main(["jobs", "list", "--bogus"]) == 2
    assert main(["frobnicate"]) == 2


def test_db_upgrade_shows_progress_then_is_a_no_op(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    head = schema.head_revision()
    assert cli(db_url, "db", "current", capsys=capsys)[1].startswith("current: none")
    code, out, err = cli(db_url, "db", "upgrade", capsys=capsys)
    assert code == 0 and out == f"upgraded empty -> {head}\n"
    assert f"empty -> {head}" in err and "Running upgrade" in err
    assert cli(db_url, "db", "upgrade", capsys=capsys)[1] == f"already at {head}\n"
    assert cli(db_url, "db", "current", capsys=capsys)[1] == f"current: {head}\nhead: {head}\n(up to date)\n"


def test_jobs_list_prints_a_table_and_filters(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = schedule(service, 2, metadata=JobMetadata(owner_id="ana"))
    other = schedule(service, 1, topic="other.topic")
    service.cancel(mine[1])
    code, out, _ = cli(db_url, "jobs", "list", capsys=capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["ID", "TOPIC", "STATUS", "RUN_AT", "OCCURRENCE", "ATTEMPT"]
    assert [line.split()[0] for line in lines[1:]] == [*mine, *other]
    assert lines[2].split()[1:3] == ["cli.test", "cancelled"] and lines[2].split()[4:] == ["1", "1"]
    filtered = cli(db_url, "jobs", "list", "--owner-id", "ana", "--status", "pending,active", capsys=capsys)[
        1
    ]
    assert [line.split()[0] for line in filtered.splitlines()[1:]] == [mine[0]]
    by_status = cli(db_url, "jobs", "list", "--status", "cancelled", "--status", "failed", capsys=capsys)[1]
    assert [line.split()[0] for line in by_status.splitlines()[1:]] == [mine[1]]
    by_topic = cli(db_url, "jobs", "list", "--topic", "other.topic", "--limit", "1", capsys=capsys)[1]
    assert by_topic.splitlines()[1].split()[0] == other[0] and "next page" not in by_topic


def test_jobs_list_prints_the_next_cursor(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = schedule(service, 3)
    out = cli(db_url, "jobs", "list", "--limit", "2", capsys=capsys)[1]
    cursor = out.splitlines()[-1].split("--cursor ")[1]
    rest = cli(db_url, "jobs", "list", "--cursor", cursor, capsys=capsys)[1]
    assert [line.split()[0] for line in rest.splitlines()[1:]] == ids[2:]


def test_jobs_show_prints_the_job_as_json(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    (job_id,) = schedule(service, payload={"to": "ana", "n": [1, 2]}, metadata=JobMetadata(tenant_id="t1"))
    code, out, _ = cli(db_url, "jobs", "show", job_id, capsys=capsys)
    shown = json.loads(out)
    assert code == 0 and shown["id"] == job_id and shown["status"] == "pending"
    assert shown["payload"] == {"to": "ana", "n": [1, 2]} and shown["metadata"]["tenant_id"] == "t1"
    assert datetime.fromisoformat(shown["run_at"]).tzinfo is not None


def test_jobs_show_includes_the_jobs_fire_history_newest_first(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    (job_id,) = schedule(service)
    container = ScheduleContainer()
    container.config.from_dict({"database_url": db_url})
    due = datetime(2030, 1, 1, tzinfo=UTC)
    fires = [
        FireRecord(
            job_id=job_id,
            topic="cli.test",
            occurrence=1,
            attempt=attempt,
            due_at=due,
            fired_at=due + timedelta(seconds=attempt),
            lateness_ms=1000 * attempt,
            duration_ms=5,
            outcome=FireOutcome.FAILED if attempt == 1 else FireOutcome.SUCCEEDED,
            error="RuntimeError: x" if attempt == 1 else None,
            worker_id="w1",
        )
        for attempt in (1, 2)
    ]
    with container.store().transaction() as tx:
        tx.record_fires(fires)
    container.shutdown_resources()
    shown = json.loads(cli(db_url, "jobs", "show", job_id, "--history", "1", capsys=capsys)[1])
    assert shown["history"] == [
        {
            "job_id": job_id,
            "topic": "cli.test",
            "occurrence": 1,
            "attempt": 2,
            "due_at": "2030-01-01T00:00:00+00:00",
            "fired_at": "2030-01-01T00:00:02+00:00",
            "lateness_ms": 2000,
            "duration_ms": 5,
            "outcome": "succeeded",
            "error": None,
            "worker_id": "w1",
        }
    ]
    assert len(json.loads(cli(db_url, "jobs", "show", job_id, capsys=capsys)[1])["history"]) == 2


def test_jobs_cancel_is_idempotent(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    (job_id,) = schedule(service)
    assert cli(db_url, "jobs", "cancel", job_id, capsys=capsys)[:2] == (0, f"{job_id} cancelled\n")
    assert cli(db_url, "jobs", "cancel", job_id, capsys=capsys)[:2] == (0, f"{job_id} cancelled\n")
    job = service.get_by_id(job_id)
    assert job is not None and job.status is JobStatus.CANCELLED


@pytest.mark.parametrize("command", ["show", "cancel"])
def test_an_unknown_job_id_exits_3(db_url: str, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(db_url, "jobs", command, UNKNOWN_ID, capsys=capsys)
    assert (code, out) == (3, "")
    assert err == f"schedule-sdk: error: no scheduled job with id '{UNKNOWN_ID}'\n"


def test_bad_filters_and_settings_exit_2(
    db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli(db_url, "jobs", "list", "--status", "sleeping", capsys=capsys)[0] == 2
    assert cli(db_url, "jobs", "list", "--limit", "0", capsys=capsys)[0] == 2
    assert cli(db_url, "jobs", "list", "--cursor", "!!", capsys=capsys)[0] == 2
    monkeypatch.setenv("SCHEDULE_WORKER_CONCURRENCY", "0")
    code, _, err = cli(db_url, "jobs", "list", capsys=capsys)
    assert code == 2 and err.startswith("schedule-sdk: error: worker_concurrency")


def test_reconcile_reports_what_it_did(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    schedule(service, 3)
    code, out, err = cli(db_url, "reconcile", "--json", capsys=capsys)
    assert code == 0 and json.loads(out) == {"scanned": 3, "healed": 0, "skipped": 3, "released": 0}
    assert "scanned 3" in err
    assert cli(db_url, "-q", "reconcile", capsys=capsys)[1:] == (
        "scanned=3 healed=0 skipped=3 released=0\n",
        "",
    )


def test_timer_passes_its_arguments_through(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timer", "--help"]) == 0
    assert "usage:" in capsys.readouterr().out


# -- subprocesses: exit codes and no tracebacks --------------------------------------------------


def test_a_bad_database_url_is_a_one_line_error_exit_2() -> None:
    assert_one_line_error(run("--database-url", "nope://x", "jobs", "list"), 2)
    assert_one_line_error(run("--database-url", "sqlite://", "db", "upgrade"), 2)


def test_an_unreachable_database_is_a_one_line_error_exit_4() -> None:
    result = run("--database-url", "postgresql+psycopg://postgres@127.0.0.1:1/nothing", "jobs", "list")
    assert_one_line_error(result, 4)
    assert "refused" in result.stderr or "failed" in result.stderr


@pytest.mark.parametrize("command", [["reconcile"], ["worker"]], ids=["reconcile", "worker"])
def test_an_unreachable_redis_is_a_one_line_error_exit_4(
    db_url: str, service: ScheduleService, command: list[str]
) -> None:
    schedule(service)  # a pending job: reconciling it needs Redis
    result = run("--database-url", db_url, "--redis-url", "redis://127.0.0.1:1/0", *command, timeout=60)
    assert_one_line_error(result, 4)


def test_an_unknown_job_id_exits_3_without_a_traceback(db_url: str) -> None:
    assert_one_line_error(run("--database-url", db_url, "jobs", "cancel", UNKNOWN_ID), 3)
    assert_one_line_error(run("--database-url", db_url, "jobs", "show", UNKNOWN_ID), 3)


def test_jobs_list_json_pages_through_every_job(db_url: str, service: ScheduleService) -> None:
    ids = schedule(service, 25)
    seen: list[str] = []
    pages: list[int] = []
    cursor: list[str] = []
    while True:
        result = run("--database-url", db_url, "jobs", "list", "--json", "--limit", "10", *cursor)
        assert result.returncode == 0, result.stderr
        page = json.loads(result.stdout)
        seen += [item["id"] for item in page["items"]]
        pages.append(len(page["items"]))
        if page["next_cursor"] is None:
            break
        cursor = ["--cursor", page["next_cursor"]]
    assert pages == [10, 10, 5] and seen == ids


@pytest.mark.parametrize("substrate", ["sql", pytest.param("rq", marks=pytest.mark.redis)])
def test_the_worker_fires_jobs_and_stops_cleanly_on_sigterm(
    db_url: str, tmp_path: Path, substrate: str, request: pytest.FixtureRequest
) -> None:
    settings = {"database_url": db_url, "substrate": substrate}
    if substrate == "rq":
        settings |= {
            "redis_url": request.getfixturevalue("redis_base_url"),
            "rq_queue": f"cli_{tmp_path.name}",
        }
    container = ScheduleContainer()
    container.config.from_dict(settings)
    request.addfinalizer(container.shutdown_resources)
    service = container.schedule_service()
    events_file = tmp_path / "events.jsonl"
    env = {
        **os.environ,
        **{f"SCHEDULE_{key.upper()}": value for key, value in settings.items()},
        "SCHEDULE_LISTENER_MODULES": "tests.cli.record_listener",
        "SCHEDULE_POLL_INTERVAL": "0.2",
        "CLI_TEST_EVENTS_FILE": str(events_file),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "schedule_sdk", "worker"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stderr is not None
        assert "started" in worker.stderr.readline()
        (job_id,) = schedule(service, in_=1)
        deadline = time.monotonic() + 20
        while (
            not (events_file.exists() and job_id in events_file.read_text()) and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        fired = [json.loads(line) for line in events_file.read_text().splitlines()]
        assert [e["scheduled_job_id"] for e in fired] == [job_id]
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=15) == 0
        assert "Traceback" not in worker.stderr.read()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    job = service.get_by_id(job_id)
    assert job is not None and job.status is JobStatus.COMPLETED
