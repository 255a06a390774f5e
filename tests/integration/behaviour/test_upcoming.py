"""``upcoming``: the fires of every open job in a window, in time order, crons and intervals
expanded, paused jobs marked, filtered by topic and tenant (sync and async services)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import CronRepeat, IntervalRepeat, JobMetadata, OneShotSpec, RepeatSpec
from schedule_sdk.errors import InvalidCursor

pytestmark = pytest.mark.usefixtures("service_kind")


def test_upcoming_lists_the_fires_of_every_open_job_in_the_window(backend):
    h = backend.harness()
    service = h.service
    now = datetime.now(UTC)
    every = service.schedule_repeat(
        RepeatSpec(topic="up.every", timezone="UTC", repeat=IntervalRepeat(every_ms=3_600_000))
    )
    hourly = service.schedule_repeat(
        RepeatSpec(
            topic="up.cron",
            timezone="UTC",
            repeat=CronRepeat(expression="30 * * * *"),
            metadata=JobMetadata(tenant_id="acme"),
        )
    )
    once = service.schedule_at(OneShotSpec(topic="up.once", run_at=now + timedelta(hours=2), timezone="UTC"))
    later = service.schedule_at(OneShotSpec(topic="up.late", run_at=now + timedelta(days=3), timezone="UTC"))
    gone = service.schedule_at(OneShotSpec(topic="up.gone", run_at=now + timedelta(hours=1), timezone="UTC"))
    service.cancel(gone.id)
    service.pause(once.id)
    fires = service.upcoming(timedelta(hours=24), limit=1000)
    assert [f.at for f in fires] == sorted(f.at for f in fires)
    by_job = {}
    for f in fires:
        by_job.setdefault(f.job_id, []).append(f)
    assert len(by_job[every.id]) == 24 and len(by_job[hourly.id]) == 24
    assert [f.paused for f in by_job[once.id]] == [True]
    assert later.id not in by_job and gone.id not in by_job
    assert all(f.fire.local.minute == 30 for f in by_job[hourly.id])
    assert [f.job_id for f in service.upcoming(timedelta(hours=24), tenant="acme")] == [hourly.id] * 24
    assert {f.topic for f in service.upcoming(timedelta(hours=5), topic="up.every")} == {"up.every"}
    assert len(service.upcoming(timedelta(hours=24), limit=5)) == 5
    with pytest.raises(InvalidCursor):
        service.upcoming(timedelta(0))
