"""The 24 h view covers 24 h: ``upcoming_page`` says how many fires the window holds and pages on
with a cursor, ``upcoming_by_job`` groups them by job with each job's count, both filter by topic,
tenant and owner, and a limit out of range is refused naming ``limit`` and its bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import CronRepeat, IntervalRepeat, JobMetadata, OneShotSpec, RepeatSpec
from schedule_sdk.errors import InvalidCursor
from tests.conftest import COMBINATIONS

BOTH_STORES = [p for p in COMBINATIONS if p.id in ("sqlite-sql", "postgres-sql")]
pytestmark = [
    pytest.mark.parametrize("backend_combination", BOTH_STORES, indirect=True),
    pytest.mark.usefixtures("service_kind"),
]

DAY = timedelta(hours=24)


def seed(service):
    fast = service.schedule_repeat(
        RepeatSpec(
            topic="win.fast",
            timezone="UTC",
            repeat=IntervalRepeat(every_ms=2000),
            metadata=JobMetadata(owner_id="ops"),
        )
    )
    hourly = service.schedule_repeat(
        RepeatSpec(
            topic="win.cron",
            timezone="UTC",
            repeat=CronRepeat(expression="30 * * * *"),
            metadata=JobMetadata(tenant_id="acme"),
        )
    )
    once = service.schedule_at(
        OneShotSpec(topic="win.once", run_at=datetime.now(UTC) + timedelta(hours=23), timezone="UTC")
    )
    return fast, hourly, once


def test_a_day_with_a_two_second_interval_is_counted_whole_and_paged_on(backend):
    service = backend.harness().service
    fast, hourly, once = seed(service)
    page = service.upcoming_page(DAY, limit=1000)
    assert len(page.items) == 1000 and page.truncated and page.next_cursor
    assert page.total in (43_200 + 24 + 1, 43_201 + 24 + 1)  # 2 s over a day, 24 hourly, one once
    seen = [(f.at, f.job_id) for f in page.items]
    cursor = page.next_cursor
    for _ in range(3):
        nxt = service.upcoming_page(DAY, limit=1000, cursor=cursor)
        assert nxt.items[0].at >= page.items[-1].at and nxt.total == page.total - 1000
        seen += [(f.at, f.job_id) for f in nxt.items]
        page, cursor = nxt, nxt.next_cursor
    assert seen == sorted(seen) and len(set(seen)) == len(seen) == 4000
    # the one list is the first page; a bound past 1000 is refused naming the argument
    assert [f.at for f in service.upcoming(DAY, limit=10)] == [at for at, _ in seen[:10]]
    with pytest.raises(InvalidCursor, match=r"limit must be an int from 1 to 1000, got 5000"):
        service.upcoming(DAY, limit=5000)
    with pytest.raises(InvalidCursor, match="malformed cursor"):
        service.upcoming_page(DAY, cursor="not-a-cursor")


def test_pages_joined_are_the_one_list(backend):
    service = backend.harness().service
    seed(service)
    pages, cursor = [], None
    while True:
        page = service.upcoming_page(timedelta(hours=3), limit=7, cursor=cursor, tenant="acme")
        pages += page.items
        if not page.truncated:
            break
        cursor = page.next_cursor
    assert [(f.at, f.job_id) for f in pages] == [
        (f.at, f.job_id) for f in service.upcoming(timedelta(hours=3), limit=1000, tenant="acme")
    ]
    assert len(pages) == 3 and page.next_cursor is None


def test_grouped_by_job_each_job_has_its_next_fires_and_its_count(backend):
    service = backend.harness().service
    fast, hourly, once = seed(service)
    grouped = service.upcoming_by_job(DAY, per_job=3)
    assert {g.job_id for g in grouped.groups} == {fast.id, hourly.id, once.id}
    assert [g.first for g in grouped.groups] == sorted(g.first for g in grouped.groups)
    groups = {g.job_id: g for g in grouped.groups}
    assert groups[fast.id].count in (43_200, 43_201) and len(groups[fast.id].fires) == 3
    assert [b.at - a.at for a, b in zip(groups[fast.id].fires, groups[fast.id].fires[1:], strict=False)] == [
        timedelta(seconds=2)
    ] * 2
    assert groups[hourly.id].count == 24 and all(f.local.minute == 30 for f in groups[hourly.id].fires)
    assert groups[once.id].count == 1
    assert grouped.jobs == 3 and not grouped.truncated
    assert grouped.fires == sum(g.count for g in grouped.groups)
    # filtered, and cut to a number of jobs, saying so
    assert [g.job_id for g in service.upcoming_by_job(DAY, owner="ops").groups] == [fast.id]
    assert [g.job_id for g in service.upcoming_by_job(DAY, tenant="acme").groups] == [hourly.id]
    assert [g.job_id for g in service.upcoming_by_job(DAY, topic="win.once").groups] == [once.id]
    cut = service.upcoming_by_job(DAY, limit=1)
    assert len(cut.groups) == 1 and cut.truncated and cut.jobs == 3
    with pytest.raises(InvalidCursor, match="per_job must be an int from 1 to 1000"):
        service.upcoming_by_job(DAY, per_job=0)
