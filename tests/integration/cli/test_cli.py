"""The ``schedule-sdk`` command line: in-process through ``main()``, and as real subprocesses for
exit codes, the one-line-error rule, and the worker's signal handling."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from schedule_sdk import (
    ConcurrencyLimit,
    CronRepeat,
    FireOutcome,
    FireRecord,
    JobMetadata,
    JobStatus,
    OneShotSpec,
    RepeatSpec,
    ScheduleContainer,
    ScheduleService,
)
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.rows import to_row
from schedule_sdk.adapters.sql.tables import schedule_jobs
from schedule_sdk.entrypoints.cli import build_parser, main
from tests.conftest import migrate
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]
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
    for word in ("worker", "reconcile", "timer", "jobs", "cron", "db", "exit codes", "SCHEDULE_DATABASE_URL"):
        assert word in out
    assert main(["jobs", "list", "--help"]) == 0
    assert "--owner-id" in capsys.readouterr().out


def test_a_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs"]) == 2
    assert main(["jobs", "list", "--bogus"]) == 2
    assert main(["frobnicate"]) == 2


def test_the_common_options_are_taken_before_or_after_the_command(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    (job,) = schedule(service)
    code = main(["jobs", "list", "--json", "--database-url", db_url, "-q"])  # as users often type it
    assert code == 0 and [j["id"] for j in json.loads(capsys.readouterr().out)["items"]] == [job]
    parse = build_parser().parse_args
    assert parse(["-vv", "jobs", "list"]).verbose == 2  # the command's parser resets nothing
    assert parse(["jobs", "list", "-v"]).verbose == 1
    assert parse(["schedules", "plan", "--log-format", "json"]).log_format == "json"
    defaults = parse(["workers"])
    assert (defaults.verbose, defaults.quiet, defaults.log_format, defaults.database_url) == (
        0,
        False,
        "text",
        None,
    )
    timer, extra = build_parser().parse_known_args(["timer", "-v", "--help"])  # all the timer's own
    assert timer.verbose == 0 and [*extra, *timer.timer_args] == ["-v", "--help"]


def test_db_upgrade_shows_progress_then_is_a_no_op(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    head = schema.head_revision()
    code, out, _ = cli(db_url, "db", "current", capsys=capsys)
    assert code == 5 and out.startswith("current: none") and "needs 'schedule-sdk db upgrade'" in out
    code, out, err = cli(db_url, "db", "upgrade", capsys=capsys)
    assert code == 0 and out == f"upgraded empty -> {head}\n"
    assert f"empty -> {head}" in err and "Running upgrade" in err
    assert cli(db_url, "db", "upgrade", capsys=capsys)[1] == f"already at {head}\n"
    assert cli(db_url, "db", "current", capsys=capsys)[:2] == (
        0,
        f"current: {head}\nhead: {head}\n(up to date)\n",
    )


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


def test_jobs_list_names_a_notice_row_beside_its_status(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    from schedule_sdk.core.give_up import failed_event, failed_notice

    (job_id,) = schedule(service)
    failed = service.get_by_id(job_id)
    assert failed is not None
    now = datetime.now(UTC)
    notice = failed_notice(failed, failed_event(failed, now, ValueError("no"), None, now), now)
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:  # the row a give-up inserts, as it stores it
        conn.execute(schedule_jobs.insert(), to_row(notice))
    engine.dispose()
    code, out, _ = cli(db_url, "jobs", "list", capsys=capsys)
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "pending (notice: schedule.failed)" in lines[notice.id]
    assert "notice" not in lines[job_id]


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
    assert shown["overlap"] is None
    assert datetime.fromisoformat(shown["run_at"]).tzinfo is not None
    assert shown["next_fire_times"] == [
        {
            "at": shown["run_at"],
            "local": shown["run_at"],
            "mark": None,
            "scheduled": [],
            "nominal": None,
            "excluded": False,
        }
    ]


def test_jobs_show_prints_the_concurrency_limit(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    (keyed,) = schedule(service, concurrency=ConcurrencyLimit(key="reports:acme", limit=3))
    (plain,) = schedule(service)
    shown = json.loads(cli(db_url, "jobs", "show", keyed, capsys=capsys)[1])
    assert shown["concurrency"] == {"key": "reports:acme", "limit": 3}
    assert json.loads(cli(db_url, "jobs", "show", plain, capsys=capsys)[1])["concurrency"] is None


def test_jobs_show_lists_a_cron_jobs_next_fire_times(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = RepeatSpec(
        topic="cli.test",
        timezone="Europe/Berlin",
        repeat=CronRepeat(expression="0 9 * * *"),
        overlap="buffer_one",
    )
    job = service.schedule_repeat(spec)
    code, out, _ = cli(db_url, "jobs", "show", job.id, capsys=capsys)
    fires = json.loads(out)["next_fire_times"]
    assert code == 0 and len(fires) == 5
    assert json.loads(out)["overlap"] == "buffer_one"
    assert fires == [f.to_dict() for f in service.preview(job.id)]
    assert [datetime.fromisoformat(f["local"]).hour for f in fires] == [9] * 5


def test_cron_prints_local_and_utc_times_and_marks_dst_changes(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["cron", "0,30 2 * * *", "--tz", "America/New_York", "-n", "3", "--after", "2026-03-08T00:00Z"]
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines() == [
        "LOCAL                       UTC                   NOTE",
        (
            "2026-03-08 Sun 03:00 -0400  2026-03-08T07:00:00Z  "
            "merged: 02:00, 02:30 fire once (clock went forward)"
        ),
        "2026-03-09 Mon 02:00 -0400  2026-03-09T06:00:00Z",
        "2026-03-09 Mon 02:30 -0400  2026-03-09T06:30:00Z",
    ]
    assert (
        main(["cron", "30 2 * * *", "--tz", "Europe/Berlin", "-n", "1", "--after", "2026-03-29T00:00Z"]) == 0
    )
    assert "moved: 02:30 does not exist (clock went forward)" in capsys.readouterr().out
    assert (
        main(
            [
                "cron",
                "*/30 1 * * *",
                "--tz",
                "America/New_York",
                "-n",
                "3",
                "--after",
                "2026-11-01T05:15Z",
                "--json",
            ]
        )
        == 0
    )
    listed = json.loads(capsys.readouterr().out)
    assert [(f["local"], f["mark"]) for f in listed] == [
        ("2026-11-01T01:30:00-04:00", None),
        ("2026-11-01T01:00:00-05:00", "repeated"),
        ("2026-11-01T01:30:00-05:00", "repeated"),
    ]


def test_cron_previews_a_spread_and_marks_the_dates_a_calendar_excludes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from schedule_sdk.domain.jobs import spread_offset_ms

    args = ["cron", "0 9 * * *", "--tz", "Europe/Berlin", "-n", "4", "--after", "2027-12-23T00:00Z"]
    options = [
        "--spread",
        "900",
        "--spread-key",
        "reports",
        "--holidays",
        "DE-BY",
        "--exclude-weekday",
        "sun",
    ]
    assert main([*args, *options, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    offset = timedelta(milliseconds=spread_offset_ms("reports", 900_000))
    assert [f["nominal"] for f in listed] == [f"2027-12-{d}T08:00:00+00:00" for d in (23, 24, 25, 26)]
    assert [datetime.fromisoformat(f["at"]) - datetime.fromisoformat(f["nominal"]) for f in listed] == [
        offset
    ] * 4
    assert [f["excluded"] for f in listed] == [False, False, True, True]  # Christmas Day, a Sunday
    assert main([*args, *options]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "excluded" in lines[3] and "spread: nominal 2027-12-25T08:00:00Z" in lines[3]
    assert "excluded" not in lines[1] and "spread: nominal 2027-12-23T08:00:00Z" in lines[1]


def test_jobs_show_lists_the_spread_jitter_and_calendar_of_a_job(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    from schedule_sdk import Calendar

    spec = RepeatSpec(
        topic="cli.test",
        timezone="UTC",
        repeat=CronRepeat(expression="0 9 * * *"),
        spread=timedelta(minutes=10),
        jitter=timedelta(seconds=3),
        calendar=Calendar(weekdays=["sat", "sun"]),
    )
    job = service.schedule_repeat(spec)
    code, out, _ = cli(db_url, "jobs", "show", job.id, capsys=capsys)
    shown = json.loads(out)
    assert code == 0 and (shown["spread_ms"], shown["jitter_ms"]) == (600_000, 3_000)
    assert shown["spread_offset_ms"] == job.spread_offset_ms
    assert shown["calendar"] == {"dates": [], "weekdays": [5, 6], "holidays": None}
    fires = shown["next_fire_times"]
    assert fires == [f.to_dict() for f in service.preview(job.id)]
    assert all(f["nominal"] is not None for f in fires)
    assert [f["excluded"] for f in fires] == [
        datetime.fromisoformat(f["nominal"]).weekday() >= 5 for f in fires
    ]


def test_cron_starts_from_now_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    before = datetime.now(UTC)
    assert main(["cron", "* * * * *", "--tz", "UTC", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) == 10
    assert before < datetime.fromisoformat(listed[0]["at"]) <= before + timedelta(minutes=1)


@pytest.mark.parametrize(
    "args",
    [
        ["cron", "0 22-2 * * *", "--tz", "UTC"],
        ["cron", "0 0 L * *", "--tz", "UTC"],
        ["cron", "0 9 * * *", "--tz", "Mars/Olympus"],
        ["cron", "0 9 * * *", "--tz", "UTC", "--after", "tomorrow"],
        ["cron", "0 9 * * *", "--tz", "UTC", "--after", "2026-01-01T00:00"],
        ["cron", "0 9 * * *", "--tz", "UTC", "-n", "0"],
        ["cron", "0 9 * * *", "--tz", "UTC", "--spread", "0"],
        ["cron", "0 9 * * *", "--tz", "UTC", "--exclude-weekday", "9"],
        ["cron", "0 9 * * *", "--tz", "UTC", "--exclude-weekday", "0,1,2,3,4,5,6"],
        ["cron", "0 9 * * *", "--tz", "UTC", "--exclude-date", "24.12.2027"],
        ["cron", "0 9 * * *", "--tz", "UTC", "--holidays", "ZZ"],
        ["cron", "0 9 25 12 *", "--tz", "UTC", "--holidays", "DE"],
    ],
)
def test_cron_errors_are_one_line_exit_2(args: list[str]) -> None:
    # the database URL is neither used nor checked by this command
    assert_one_line_error(run(*args, env={"SCHEDULE_DATABASE_URL": "nope://x"}), 2)


def test_cron_without_a_zone_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cron", "0 9 * * *"]) == 2
    assert "--tz" in capsys.readouterr().err


def test_cron_needs_no_database(tmp_path: Path) -> None:
    result = run("cron", "0 9 * * *", "--tz", "UTC", "-n", "1", env={"SCHEDULE_DATABASE_URL": "nope://x"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].split() == ["LOCAL", "UTC", "NOTE"]


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
            "traceback": None,
        }
    ]
    assert len(json.loads(cli(db_url, "jobs", "show", job_id, capsys=capsys)[1])["history"]) == 2


def test_jobs_show_of_a_run_names_the_job_it_runs_for_and_shows_that_occurrences_fires(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    job = service.schedule_repeat(
        RepeatSpec(
            topic="cli.test", timezone="UTC", repeat=CronRepeat(expression="* * * * *"), overlap="allow"
        )
    )
    assert json.loads(cli(db_url, "jobs", "show", job.id, capsys=capsys)[1])["overlap"] == "allow"
    run = job.evolve(occurrence=2).run_for("01900000-0000-7000-8000-0000000000c2", job.created_at)
    container = ScheduleContainer()
    container.config.from_dict({"database_url": db_url})
    due = datetime(2030, 1, 1, tzinfo=UTC)
    fires = [
        FireRecord(
            job_id=job.id,
            topic="cli.test",
            occurrence=occurrence,
            attempt=1,
            due_at=due,
            fired_at=due + timedelta(minutes=occurrence),
            lateness_ms=60_000 * occurrence,
            duration_ms=5,
            outcome=FireOutcome.SUCCEEDED,
            error=None,
            worker_id=f"w{occurrence}",
        )
        for occurrence in (1, 2)
    ]
    with container.store().transaction() as tx:
        tx.insert(run)
        tx.record_fires(fires)
    container.shutdown_resources()
    shown = json.loads(cli(db_url, "jobs", "show", run.id, capsys=capsys)[1])
    assert shown["run_of"] == job.id and shown["note"].startswith(f"run of {job.id}")
    assert [(f["occurrence"], f["worker_id"]) for f in shown["history"]] == [(2, "w2")]
    parent = json.loads(cli(db_url, "jobs", "show", job.id, capsys=capsys)[1])
    assert parent["run_of"] is None and "note" not in parent and len(parent["history"]) == 2


def test_jobs_cancel_is_idempotent(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    (job_id,) = schedule(service)
    assert cli(db_url, "jobs", "cancel", job_id, capsys=capsys)[:2] == (0, f"{job_id} cancelled\n")
    assert cli(db_url, "jobs", "cancel", job_id, capsys=capsys)[:2] == (0, f"{job_id} cancelled\n")
    job = service.get_by_id(job_id)
    assert job is not None and job.status is JobStatus.CANCELLED


def test_jobs_pause_resume_and_trigger(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    (job_id,) = schedule(service)
    for _ in range(2):  # idempotent
        assert cli(db_url, "jobs", "pause", job_id, capsys=capsys)[:2] == (0, f"{job_id} paused\n")
    assert service.get_by_id(job_id).status is JobStatus.PAUSED  # type: ignore[union-attr]
    code, out, err = cli(db_url, "jobs", "trigger", job_id, capsys=capsys)
    assert (code, out) == (1, "") and err.startswith("schedule-sdk: error: job ") and "paused" in err
    assert "unexpected" not in err
    for _ in range(2):
        assert cli(db_url, "jobs", "resume", job_id, capsys=capsys)[:2] == (0, f"{job_id} pending\n")
    assert cli(db_url, "jobs", "trigger", job_id, capsys=capsys)[:2] == (0, f"{job_id} pending (fires now)\n")
    job = service.get_by_id(job_id)
    assert job is not None and job.run_at <= datetime.now(UTC)


def test_steering_a_finished_job_exits_1_with_one_line(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    (job_id,) = schedule(service)
    service.cancel(job_id)
    for command in ("pause", "resume", "trigger"):
        code, out, err = cli(db_url, "jobs", command, job_id, capsys=capsys)
        assert (code, out) == (1, "")
        assert err == f"schedule-sdk: error: job '{job_id}' is cancelled: a finished job cannot be steered\n"


def test_jobs_requeue_runs_finished_jobs_again_and_reports_each_refusal(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second, pending = schedule(service, 3)
    for job_id in (first, second):
        service.cancel(job_id)
    code, out, err = cli(db_url, "jobs", "requeue", first, pending, UNKNOWN_ID, second, capsys=capsys)
    assert code == 1  # the first refusal's exit code (refused on purpose: 1)
    lines = out.splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"{first} pending", f"{second} pending"]
    assert all("(occurrence 2, due " in line for line in lines)
    assert err.splitlines() == [
        (
            f"schedule-sdk: error: job '{pending}' cannot be requeued: it is pending; "
            "only a finished job is requeued"
        ),
        f"schedule-sdk: error: no scheduled job with id '{UNKNOWN_ID}'",
    ]
    for job_id in (first, second):
        job = service.get_by_id(job_id)
        assert job is not None and (job.status, job.occurrence) == (JobStatus.PENDING, 2)
    assert service.get_by_id(pending).occurrence == 1  # type: ignore[union-attr]
    assert cli(db_url, "jobs", "requeue", UNKNOWN_ID, capsys=capsys)[0] == 3  # not found


def test_jobs_purge_deletes_old_finished_jobs_with_progress(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    finished = schedule(service, 5)
    kept = schedule(service, 2)
    for job_id in finished:
        service.cancel(job_id)
    code, out, _ = cli(db_url, "jobs", "purge", "--older-than", "1h", capsys=capsys)
    assert (code, out) == (  # not old enough yet
        0,
        "purged 0 finished jobs older than 1h\npurged 0 fire history rows older than 1h\n",
    )
    last_cancelled = max(service.get_by_id(job_id).updated_at for job_id in finished)
    assert wait_until(lambda: datetime.now(UTC) > last_cancelled + timedelta(seconds=1.1))  # older than 1s
    code, out, err = cli(db_url, "jobs", "purge", "--older-than", "1s", "--batch-size", "2", capsys=capsys)
    assert (code, out) == (
        0,
        "purged 5 finished jobs older than 1s\npurged 0 fire history rows older than 1s\n",
    )
    assert err.splitlines() == [
        "purging: 2 deleted",
        "purging: 4 deleted",
        "purging: 5 deleted",
        "purged: 5 deleted",
        "purging fire history: 0 deleted",
        "purged fire history: 0 deleted",
    ]
    assert [service.get_by_id(j) for j in finished] == [None] * 5
    assert all(service.get_by_id(j) is not None for j in kept)
    code, _, err = cli(db_url, "jobs", "purge", "--older-than", "soon", capsys=capsys)
    assert code == 2 and "--older-than" in err


def test_jobs_purge_deletes_old_fire_history_and_its_per_minute_summary(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    (job_id,) = schedule(service)
    now = datetime.now(UTC)
    old = now - timedelta(days=2)
    fires = [
        FireRecord(
            job_id=job_id,
            topic="cli.test",
            occurrence=n,
            attempt=1,
            due_at=fired_at,
            fired_at=fired_at,
            lateness_ms=lateness,
            duration_ms=5,
            outcome=FireOutcome.FAILED if n == 1 else FireOutcome.SUCCEEDED,
            error="RuntimeError: x" if n == 1 else None,
            worker_id="w1",
        )
        for n, fired_at, lateness in (
            (1, old, 3),
            (2, old, 3),
            (3, old + timedelta(minutes=5), 700),
            (4, now, 3),
        )
    ]
    container = ScheduleContainer()
    container.config.from_dict({"database_url": db_url})
    with container.store().transaction() as tx:
        tx.record_fires(fires)
    summary = "SELECT minute FROM schedule_fire_minutes UNION ALL SELECT minute FROM schedule_fire_failures"
    with container.engine().connect() as conn:
        assert len(conn.exec_driver_sql(summary).all()) == 4  # old: 2 minutes, 1 failure; now: 1
    code, out, err = cli(db_url, "jobs", "purge", "--older-than", "1d", "--batch-size", "2", capsys=capsys)
    # 3 old entries, then 3 rows of the summary of their minutes; 2 rows per transaction
    assert (code, out) == (
        0,
        "purged 0 finished jobs older than 1d\npurged 6 fire history rows older than 1d\n",
    )
    assert err.splitlines() == [
        "purging: 0 deleted",
        "purged: 0 deleted",
        "purging fire history: 2 deleted",
        "purging fire history: 4 deleted",
        "purging fire history: 6 deleted",
        "purging fire history: 6 deleted",
        "purged fire history: 6 deleted",
    ]
    assert [f.occurrence for f in service.history(job_id)] == [4]
    with container.engine().connect() as conn:
        assert [row[0] for row in conn.exec_driver_sql(summary)] == [int(now.timestamp() // 60)]
    container.shutdown_resources()


@pytest.mark.parametrize("command", ["show", "cancel", "pause", "resume", "trigger"])
def test_an_unknown_job_id_exits_3(db_url: str, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(db_url, "jobs", command, UNKNOWN_ID, capsys=capsys)
    assert (code, out) == (3, "")
    assert err == f"schedule-sdk: error: no scheduled job with id '{UNKNOWN_ID}'\n"


def test_bad_filters_and_settings_exit_2(
    db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = cli(db_url, "jobs", "list", "--status", "sleeping", capsys=capsys)
    known = "pending, active, completed, cancelled, failed, paused"
    assert (code, err) == (2, f"schedule-sdk: error: no job status 'sleeping': one of {known}\n")
    assert cli(db_url, "jobs", "list", "--limit", "0", capsys=capsys)[0] == 2
    assert cli(db_url, "jobs", "list", "--cursor", "!!", capsys=capsys)[0] == 2
    monkeypatch.setenv("SCHEDULE_WORKER_CONCURRENCY", "0")
    code, _, err = cli(db_url, "jobs", "list", capsys=capsys)
    assert code == 2 and err.startswith("schedule-sdk: error: worker_concurrency")


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_hostile_text_is_refused_escaped_and_cut_on_one_line(
    store: str, database_url_factory: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = database_url_factory(store)
    migrate(url)
    for option in ("--owner", "--tenant"):
        code, out, err = cli(url, "jobs", "list", option, "\x1b[31mroot\r\nFAKE\x85", capsys=capsys)
        assert code == 2 and out == "" and "control character" in err
        assert err.count("\n") == 1 and not any(c in err for c in "\x1b\r\x85")  # escaped, one line
    bad = "\x00" * 36  # a cursor of no job id: refused as a cursor, not as a store failure (exit 4)
    cursor = base64.urlsafe_b64encode(bad.encode()).decode().rstrip("=")
    code, _, err = cli(url, "jobs", "list", "--cursor", cursor, capsys=capsys)
    assert code == 2 and "cursor" in err
    code, _, err = cli(url, "cron", "* * * * *", "--tz", "Z" * 100_000, capsys=capsys)
    assert code == 2 and len(err) < 400 and "more characters)" in err  # was the whole zone
    code, _, err = cli(url, "jobs", "list", "--topic", "t" * 100_000, capsys=capsys)
    assert code == 2 and len(err) < 400


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_stored_control_character_reaches_the_terminal_escaped(
    store: str, database_url_factory: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = database_url_factory(store)
    migrate(url)
    container = ScheduleContainer()
    container.config.from_dict({"database_url": url})
    try:
        (job_id,) = schedule(container.schedule_service(), metadata=JobMetadata(owner_id="plain"))
        legacy = "\x1b]0;owned\x07\x1b[2J\r\n\x85\u2028\x7f"  # as an older release could store it
        with container.engine().begin() as conn:
            conn.execute(sa.update(schedule_jobs).values(owner_id=legacy))
    finally:
        container.shutdown_resources()
    for args in (("jobs", "show", job_id), ("jobs", "list", "--json")):
        code, out, _ = cli(url, *args, capsys=capsys)
        assert code == 0 and not any(c in out for c in "\x1b\x07\r\x85\u2028\x7f"), args
        items = json.loads(out)
        shown = items["metadata"] if "metadata" in items else items["items"][0]["metadata"]
        assert shown["owner_id"] == legacy  # the same JSON value, escaped in the text


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
    text = capsys.readouterr().out
    assert "usage:" in text and "TIMER_*" in text
    assert "``" not in text and ":class:" not in text  # plain text, not reStructuredText


def test_a_beat_stamped_ahead_of_the_clock_reads_zero_seconds_ago() -> None:
    from schedule_sdk.entrypoints.cli import beat_age

    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert beat_age(now, now + timedelta(milliseconds=40)) == "0.0s ago"  # was "-0.0s ago"
    assert beat_age(now, now - timedelta(seconds=1.26)) == "1.3s ago"


# -- subprocesses: exit codes and no tracebacks --------------------------------------------------


def test_a_bad_database_url_is_a_one_line_error_exit_2() -> None:
    assert_one_line_error(run("--database-url", "nope://x", "jobs", "list"), 2)
    assert_one_line_error(run("--database-url", "sqlite://", "db", "upgrade"), 2)


@pytest.mark.parametrize(
    "url",
    [
        "postgres://app:Hunter2Secret@db:5432/jobs",  # no such dialect
        "postgresql+nodriver://app:Hunter2Secret@db/jobs",  # no such driver
        "mysql://app:Hunter2Secret@db/jobs",  # not a supported database
        "postgresql+psycopg://app:Hunter2Secret@127.0.0.1:1/jobs",  # unreachable
    ],
)
def test_a_bad_database_url_never_prints_its_password(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(url, "jobs", "list", capsys=capsys)
    assert code in (2, 4)
    assert "Hunter2Secret" not in out + err
    assert "app:***@" in err or code == 4


def test_a_bad_redis_url_never_prints_its_password(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad = "redis-ish://:Hunter2Secret@x:1/0"
    code, out, err = cli(db_url, "--redis-url", bad, "jobs", "list", capsys=capsys)
    assert code == 2 and "Hunter2Secret" not in out + err and ":***@" in err


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
        "SCHEDULE_LISTENER_MODULES": "tests.integration.cli.record_listener",
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
        wait_until(lambda: events_file.exists() and job_id in events_file.read_text(), 20)
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


def test_the_worker_imports_listener_modules_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A console script's sys.path holds its own folder, not the working directory: the worker
    puts the working directory first, as Celery and RQ do."""
    from schedule_sdk.entrypoints.cli import UsageError, import_listener_modules

    (tmp_path / "op_cwd_listeners.py").write_text("LOADED = True\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "op_cwd_listeners", raising=False)
    import_listener_modules(["op_cwd_listeners"])
    assert sys.modules["op_cwd_listeners"].LOADED and sys.path[0] == str(tmp_path)
    with pytest.raises(UsageError, match="cannot import listener module 'op_cwd_missing'"):
        import_listener_modules(["op_cwd_missing"])


def test_jobs_show_prints_the_time_limit_in_milliseconds(
    db_url: str, service: ScheduleService, capsys: pytest.CaptureFixture[str]
) -> None:
    limited, plain = schedule(service, time_limit=timedelta(seconds=90)) + schedule(service)
    shown = json.loads(cli(db_url, "jobs", "show", limited, capsys=capsys)[1])
    assert shown["time_limit_ms"] == 90_000 and "time_limit" not in shown
    assert json.loads(cli(db_url, "jobs", "show", plain, capsys=capsys)[1])["time_limit_ms"] is None
    listed = json.loads(cli(db_url, "jobs", "list", "--json", capsys=capsys)[1])["items"]
    assert {j["id"]: j["time_limit_ms"] for j in listed} == {limited: 90_000, plain: None}


def test_an_invalid_time_limit_setting_is_a_usage_error() -> None:
    result = run("health", env={"SCHEDULE_TIME_LIMITS": "reports.build=10x"})
    assert_one_line_error(result, 2)
    assert "time_limits" in result.stderr or "duration" in result.stderr
