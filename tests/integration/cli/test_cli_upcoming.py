"""``schedule-sdk upcoming --within 24h [--json] [--topic ...] [--group]`` on both stores: the
page says how many fires the window holds and how to page on, ``--group`` gives one line per job
with its count, ``--limit`` past its bound is a usage error naming it."""

from __future__ import annotations

import json

import pytest

from schedule_sdk import CronRepeat, IntervalRepeat, RepeatSpec
from schedule_sdk.entrypoints.cli import main
from tests.conftest import COMBINATIONS

BOTH_STORES = [p for p in COMBINATIONS if p.id in ("sqlite-sql", "postgres-sql")]
pytestmark = pytest.mark.parametrize("backend_combination", BOTH_STORES, indirect=True)


def cli(backend, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--database-url", backend.database_url, "upcoming", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_upcoming_pages_groups_and_filters(backend, capsys: pytest.CaptureFixture[str]) -> None:
    service = backend.harness().service
    fast = service.schedule_repeat(
        RepeatSpec(topic="cli.fast", timezone="UTC", repeat=IntervalRepeat(every_ms=2000))
    )
    hourly = service.schedule_repeat(
        RepeatSpec(topic="cli.hourly", timezone="UTC", repeat=CronRepeat(expression="15 * * * *"))
    )
    code, out, _ = cli(backend, capsys, "--within", "24h", "--json", "--limit", "1000")
    page = json.loads(out)
    assert code == 0 and len(page["items"]) == 1000 and page["truncated"] and page["total"] > 43_000
    code, out, _ = cli(backend, capsys, "--json", "--limit", "1000", "--cursor", page["next_cursor"])
    assert code == 0 and json.loads(out)["items"][0]["at"] >= page["items"][-1]["at"]
    code, out, _ = cli(backend, capsys, "--within", "24h", "--limit", "5")
    assert code == 0 and out.splitlines()[-1].startswith("5 of ") and "truncated: --cursor " in out
    code, out, _ = cli(backend, capsys, "--within", "24h", "--group")
    lines = out.splitlines()
    assert lines[0].startswith(f"{fast.id}  cli.fast  ") and lines[1].startswith(
        f"{hourly.id}  cli.hourly  24 fire(s)"
    )
    assert lines[-1].startswith("2 job(s), ")
    code, out, _ = cli(backend, capsys, "--within", "24h", "--group", "--json", "--topic", "cli.hourly")
    grouped = json.loads(out)
    assert [(g["job_id"], g["count"]) for g in grouped["groups"]] == [(hourly.id, 24)]
    code, _, err = cli(backend, capsys, "--limit", "5000")
    assert code == 2 and "--limit must be an int from 1 to 1000, got 5000" in err
