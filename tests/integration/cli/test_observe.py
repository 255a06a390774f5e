"""The operator surface: ``workers``, ``health``, metrics (memory and Prometheus, served by
the worker command) and structured / JSON logs."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, ConcurrencyLimit, JobStatus, OneShotSpec, ScheduleContainer
from schedule_sdk.domain.jobs import Backoff, RetryPolicy
from schedule_sdk.entrypoints.cli import main
from schedule_sdk.entrypoints.logs import JsonFormatter
from schedule_sdk.ports import WorkerRegistry, require
from tests.harness import Harness
from tests.support.waiting import wait_for, wait_until

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture
def harness(db_url: str) -> Iterator[Harness]:
    h = Harness({"database_url": db_url, "metrics": "memory", "poll_interval": 0.2})
    yield h
    h.close()
    h.container.shutdown_resources()


def cli(db_url: str, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["--database-url", db_url, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def spec(seconds: float, topic: str = "obs.test") -> OneShotSpec:
    return OneShotSpec(topic=topic, run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC")


def test_workers_lists_live_workers_and_shows_dead_ones(harness: Harness, db_url: str, capsys) -> None:
    harness.start()
    me = harness.worker.dispatcher.worker_id
    stale = replace(
        require(harness.store, WorkerRegistry, "the test").workers()[0],
        id="old-one",
        last_beat=datetime.now(UTC) - timedelta(minutes=5),
    )
    require(harness.store, WorkerRegistry, "the test").beat(stale)
    code, out, _ = cli(db_url, "workers", "--json", capsys=capsys)
    listed = {w["id"]: w for w in json.loads(out)["workers"]}
    assert code == 0 and {k: w["state"] for k, w in listed.items()} == {me: "live", "old-one": "dead"}
    # a SQLite store's clock is the machine's: the worker's offset is 0 by definition
    assert (listed[me]["clock_offset"], listed[me]["clock_error"]) == (0.0, 0.0)
    code, out, _ = cli(db_url, "workers", capsys=capsys)
    lines = out.splitlines()
    assert lines[0].split() == [
        "ID",
        "HOST",
        "PID",
        "SUBSTRATE",
        "STARTED",
        "LAST_BEAT",
        "IN_FLIGHT",
        "STUCK",
        "CLOCK_OFFSET",
        "STATE",
    ]
    assert any(line.startswith(me) and "+0.000s±0.000" in line for line in lines), out
    harness.stop()
    assert [w.id for w in require(harness.store, WorkerRegistry, "the test").workers()] == [
        "old-one"
    ]  # a clean stop deregisters


def test_health_exit_codes_follow_workers_backlog_and_store(harness: Harness, db_url: str, capsys) -> None:
    code, out, _ = cli(db_url, "health", capsys=capsys)
    assert code == 5 and "workers  FAIL" in out and out.endswith("unhealthy\n")
    due = harness.service.schedule_at(spec(0.05))
    assert wait_until(lambda: datetime.now(UTC) > due.run_at + timedelta(seconds=0.2))  # due 0.2 s, unfired
    code, out, _ = cli(
        db_url, "health", "--min-workers", "0", "--max-backlog-age", "0.1", "--json", capsys=capsys
    )
    report = json.loads(out)
    assert code == 5 and [c["name"] for c in report["checks"] if not c["ok"]] == ["backlog"]
    harness.start()
    assert harness.wait_for(lambda: len(harness.events) == 1)
    code, out, _ = cli(db_url, "health", capsys=capsys)
    assert code == 0 and out.endswith("healthy\n"), out
    code, _, _ = cli("postgresql+psycopg://postgres@127.0.0.1:1/none", "health", capsys=capsys)
    assert code == 4


def test_fires_feed_the_job_counters_and_histograms(harness: Harness) -> None:
    def flaky(event) -> None:
        if event.topic == "obs.flaky" and event.attempt == 1:
            raise RuntimeError("first attempt fails")

    harness.listen(SCHEDULE_ARRIVED_EVENT, flaky)
    metrics = harness.container.metrics()
    ok = harness.service.schedule_at(spec(0.1))
    flaky_job = harness.service.schedule_at(
        OneShotSpec(topic="obs.flaky", run_at=datetime.now(UTC) + timedelta(seconds=0.1), timezone="UTC",
                    retry=RetryPolicy(attempts=2, backoff=Backoff(delay_ms=50)))
    )  # fmt: skip
    cancelled = harness.service.schedule_at(spec(3600))
    harness.service.cancel(cancelled.id)
    harness.start()
    harness.wait_status(ok.id, "completed")
    harness.wait_status(flaky_job.id, "completed")
    assert metrics.count("schedule.jobs.scheduled") == 3
    assert metrics.count("schedule.jobs.cancelled", topic="obs.test") == 1
    assert metrics.count("schedule.jobs.fired", topic="obs.test", outcome="completed") == 1
    assert metrics.count("schedule.jobs.fired", topic="obs.flaky", outcome="retry") == 1
    assert metrics.count("schedule.jobs.fired", topic="obs.flaky", outcome="completed") == 1
    assert metrics.count("schedule.jobs.failed", topic="obs.flaky") == 1
    assert metrics.count("schedule.jobs.retried", topic="obs.flaky") == 1
    assert len(metrics.observed("schedule.fire.lateness")) == 3
    assert all(s >= 0 for s in metrics.observed("schedule.listener.duration"))


def test_prometheus_exposition_has_labelled_counters_and_backlog_gauges(db_url: str) -> None:
    h = Harness({"database_url": db_url, "metrics": "prometheus"})
    try:
        due = h.service.schedule_at(spec(0.05, topic="a"))
        h.service.schedule_at(spec(3600, topic="a"))
        h.service.schedule_at(spec(3600, topic="b"))
        assert wait_until(lambda: datetime.now(UTC) > due.run_at + timedelta(seconds=0.2))  # due 0.2 s
        text = h.container.metrics().exposition().decode()
        assert 'schedule_jobs_scheduled_total{topic="a"} 2.0' in text
        assert 'schedule_jobs_pending{topic="a"} 2.0' in text
        assert 'schedule_jobs_backlog{topic="a"} 1.0' in text
        assert 'schedule_jobs_backlog{topic="b"} 0.0' in text
        oldest = next(
            line
            for line in text.splitlines()
            if line.startswith('schedule_jobs_backlog_oldest_seconds{topic="a"}')
        )
        assert float(oldest.split()[-1]) >= 0.2
        assert "job_id" not in text
        assert "schedule_worker_clock_offset_seconds" not in text  # not measured: no worker here
        h.start()  # a worker measures its clock's offset (0 on SQLite: the machine's clock)
        text = h.container.metrics().exposition().decode()
        assert "schedule_worker_clock_offset_seconds 0.0" in text.splitlines()
        assert "schedule_worker_clock_error_seconds 0.0" in text.splitlines()
    finally:
        h.close()


def test_prometheus_exposition_has_running_and_waiting_gauges_per_concurrency_key(db_url: str) -> None:
    h = Harness({"database_url": db_url, "metrics": "prometheus"})
    try:
        limit = ConcurrencyLimit(key="reports", limit=1)
        jobs = [h.service.schedule_at(replace(spec(0.05 + n * 0.01), concurrency=limit)) for n in range(3)]
        h.service.schedule_at(replace(spec(3600), concurrency=ConcurrencyLimit(key="later", limit=4)))
        assert wait_until(lambda: datetime.now(UTC) > jobs[-1].run_at)
        store = h.store
        now = datetime.now(UTC)
        assert len(store.claim_due(now, 10, "w1", now + timedelta(minutes=1))) == 1
        text = h.container.metrics().exposition().decode()
        assert 'schedule_concurrency_running{key="reports"} 1.0' in text
        assert 'schedule_concurrency_waiting{key="reports"} 2.0' in text
        assert 'schedule_concurrency_limit{key="reports"} 1.0' in text
        assert 'schedule_concurrency_waiting{key="later"} 0.0' in text
    finally:
        h.container.shutdown_resources()


def test_the_worker_command_serves_metrics_and_logs_json(db_url: str, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    container = ScheduleContainer()
    container.config.from_dict({"database_url": db_url})
    job = container.schedule_service().schedule_at(spec(0.5, topic="obs.cli"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "schedule_sdk", "--database-url", db_url, "--log-format", "json", "-vv",
         "worker", "--metrics-port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:

        def scrape() -> str:
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            except OSError:
                return ""

        done = 'outcome="completed",topic="obs.cli"} 1.0'
        unheard = 'schedule_jobs_unheard_total{topic="obs.cli"} 1.0'  # the worker has no listener
        text = wait_for(
            lambda: t if done in (t := scrape()) and unheard in t else None, "the fire in /metrics", 20
        )
        assert 'schedule_jobs_fired_total{outcome="completed",topic="obs.cli"} 1.0' in text
        assert container.schedule_service().get_by_id(job.id).status is JobStatus.COMPLETED
        assert "# HELP schedule_jobs_fired_total Fires whose listeners ran" in text  # real HELP texts
        base = f"http://127.0.0.1:{port}"
        assert urllib.request.urlopen(f"{base}/healthz", timeout=5).read() == b"ok\n"
        ready = json.loads(urllib.request.urlopen(f"{base}/readyz", timeout=5).read())
        checks = {c["name"]: c for c in ready["checks"]}
        assert ready["ok"] and checks["workers"]["ok"]
        assert checks["unheard"]["warning"] and "obs.cli (1)" in checks["unheard"]["detail"]
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{base}/nope", timeout=5)
        assert missing.value.code == 404
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
        container.shutdown_resources()
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    fired = [r for r in records if r.get("job_id") == job.id]
    assert fired and fired[0]["topic"] == "obs.cli" and fired[0]["occurrence"] == 1, err[-2000:]
    assert any(
        r["level"] == "WARNING" and "started with no @on_event listener" in r["message"] for r in records
    ), err[-2000:]
    assert f"on http://127.0.0.1:{port}/" in err  # loopback unless --metrics-host says otherwise


def test_json_formatter_keeps_structured_fields() -> None:
    record = logging.LogRecord("schedule_sdk.x", logging.WARNING, __file__, 1, "job %s", ("j1",), None)
    record.job_id, record.occurrence, record.topic = "j1", 3, "t"
    data = json.loads(JsonFormatter().format(record))
    assert data | {"time": None} == {
        "time": None, "level": "WARNING", "logger": "schedule_sdk.x", "message": "job j1",
        "job_id": "j1", "occurrence": 3, "topic": "t",
    }  # fmt: skip


def test_a_failing_listener_logs_the_job_fields(harness: Harness, caplog) -> None:
    def boom(event) -> None:
        raise RuntimeError("boom")

    harness.listen(SCHEDULE_ARRIVED_EVENT, boom)
    job = harness.service.schedule_at(spec(0.05))
    with caplog.at_level(logging.ERROR):
        harness.start()
        harness.wait_status(job.id, "failed")
    record = next(r for r in caplog.records if getattr(r, "job_id", None) == job.id)
    assert (record.occurrence, record.attempt, record.topic) == (1, 1, "obs.test")
