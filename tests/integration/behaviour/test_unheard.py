"""Fires that no listener hears: recorded as ``unheard`` (the job still completes), warned about
once per topic, counted, reported by the health check; with ``unheard_fails`` a failed attempt
that follows the retry policy. On every store x substrate, through the real fire path."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    Backoff,
    FireOutcome,
    OneShotSpec,
    RetryPolicy,
    schedule_arrived_event_name,
)
from schedule_sdk.core.health import container_health
from schedule_sdk.domain.errors import InvalidStatus
from schedule_sdk.entrypoints.cli import main
from tests.support.waiting import wait_until


def _soon(topic: str, **fields: object) -> OneShotSpec:
    run_at = datetime.now(UTC) + timedelta(milliseconds=300)
    return OneShotSpec(topic=topic, run_at=run_at, timezone="UTC", **fields)  # type: ignore[arg-type]


def _history(h, job_id: str, count: int):
    assert wait_until(lambda: len(h.service.history(job_id)) >= count, timeout=15), h.job(job_id)
    return h.service.history(job_id)


def test_an_unheard_fire_completes_the_job_and_is_recorded_warned_and_counted(backend, caplog):
    caplog.set_level(logging.WARNING, logger="schedule_sdk")
    h = backend.harness(metrics="memory").deafen().start()
    heard = []
    h.listen(schedule_arrived_event_name("tests.heard"), heard.append)
    typo = [h.service.schedule_at(_soon("log.typo")) for _ in range(2)]
    fine = h.service.schedule_at(_soon("tests.heard"))
    for job in (*typo, fine):
        h.wait_status(job.id, "completed")
    for job in typo:
        (entry,) = _history(h, job.id, 1)
        assert (entry.outcome, entry.error) == (FireOutcome.UNHEARD, None)
        assert h.job(job.id).last_error is None
    (entry,) = _history(h, fine.id, 1)
    assert entry.outcome is FireOutcome.SUCCEEDED and len(heard) == 1
    metrics = h.container.metrics()
    assert metrics.count("schedule.jobs.unheard", topic="log.typo") == 2
    assert metrics.count("schedule.jobs.unheard", topic="tests.heard") == 0
    warned = [r for r in caplog.records if "no listener heard topic 'log.typo'" in r.getMessage()]
    assert len(warned) == 1  # once per topic per worker, however many fires
    started = [r for r in caplog.records if "started with no @on_event listener" in r.getMessage()]
    assert len(started) == 1 and started[0].levelno == logging.WARNING
    report = container_health(h.container, min_workers=0)
    (line,) = [c for c in report.checks if c.name == "unheard"]
    assert line.ok and line.warning and "log.typo (2)" in line.detail
    assert report.ok  # a warning, not a failure: the jobs moved on


def test_with_unheard_fails_an_unheard_fire_is_a_failed_attempt_that_is_retried(backend):
    h = backend.harness(unheard_fails=True).deafen().start()
    retry = RetryPolicy(attempts=2, backoff=Backoff(type="fixed", delay_ms=100))
    job = h.service.schedule_at(_soon("log.typo", retry=retry))
    failed = h.wait_status(job.id, "failed")
    assert failed.attempt == 2 and failed.last_error == "UnheardFire: no listener heard topic 'log.typo'"
    second, first = _history(h, job.id, 2)
    assert [(e.attempt, e.outcome) for e in (first, second)] == [
        (1, FireOutcome.UNHEARD),
        (2, FireOutcome.UNHEARD),
    ]
    assert first.failed and second.error == failed.last_error


def test_an_unheard_fire_shows_in_job_lists_and_is_filtered_by_outcome(backend, capsys):
    h = backend.harness().deafen().start()
    heard = []
    h.listen(schedule_arrived_event_name("tests.heard"), heard.append)
    typo = h.service.schedule_at(_soon("list.typo"))
    fine = h.service.schedule_at(_soon("tests.heard"))
    waiting = h.service.schedule_at(
        OneShotSpec(topic="tests.heard", run_at=datetime.now(UTC) + timedelta(hours=1), timezone="UTC")
    )
    for job in (typo, fine):
        h.wait_status(job.id, "completed")
    assert h.job(typo.id).last_outcome is FireOutcome.UNHEARD
    assert h.job(fine.id).last_outcome is FireOutcome.SUCCEEDED
    assert h.job(waiting.id).last_outcome is None  # no attempt ran yet
    assert [j.id for j in h.service.list(outcome="unheard").items] == [typo.id]
    assert [j.id for j in h.service.list(outcome=["unheard", "succeeded"]).items] == [typo.id, fine.id]
    assert [j.id for j in h.service.list(status="completed", outcome="unheard").items] == [typo.id]
    assert h.service.list(status="pending", outcome="unheard").items == []
    with pytest.raises(InvalidStatus, match="filter by its outcome"):
        h.service.list(status="unheard")
    with pytest.raises(InvalidStatus, match="no fire outcome 'deaf'"):
        h.service.list(outcome="deaf")
    # the CLI: the outcome beside the status in the table, the field in --json, the filter
    url = ["--database-url", backend.database_url]
    assert main([*url, "jobs", "list"]) == 0
    rows = {line.split()[0]: line.split()[2:4] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows[typo.id] == ["completed", "(unheard)"] and rows[fine.id][0] == "completed"
    assert not rows[fine.id][1].startswith("(") and rows[waiting.id][0] == "pending"
    assert main([*url, "jobs", "list", "--outcome", "unheard", "--json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)["items"]
    assert (item["id"], item["status"], item["last_outcome"]) == (typo.id, "completed", "unheard")
