"""The examples of docs/howto/concurrency-keys.md, run as tests (on the testing kit)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import ConcurrencyLimit, JobStatus, ListenerRegistry, OneShotSpec, cron
from schedule_sdk.errors import InvalidConcurrency
from schedule_sdk.testing import make_test_kit


def test_a_key_limits_how_many_fires_run_at_once():
    kit = make_test_kit(ListenerRegistry(), start=datetime.now(UTC))
    service = kit.service
    tenant = "acme"
    # --8<-- [start:schedule]
    reports = ConcurrencyLimit(key=f"reports:{tenant}", limit=2)
    job = service.schedule_at(
        OneShotSpec(
            topic="reports.build",
            run_at=datetime.now(UTC) + timedelta(minutes=5),
            timezone="Europe/Berlin",
            payload={"tenant": tenant},
            concurrency=reports,
        )
    )
    assert service.get_by_id(job.id).concurrency == reports
    # --8<-- [end:schedule]
    # --8<-- [start:change]
    job = service.reschedule(
        job.id,
        OneShotSpec(
            topic="reports.build",
            run_at=job.run_at,
            timezone="Europe/Berlin",
            payload={"tenant": tenant},
            concurrency=ConcurrencyLimit(key=f"reports:{tenant}", limit=4),
        ),
    )
    # --8<-- [end:change]
    assert job.concurrency.limit == 4
    with pytest.raises(InvalidConcurrency):
        # --8<-- [start:refused]
        ConcurrencyLimit(key="reports for acme", limit=2)  # InvalidConcurrency: no spaces in a key
        # --8<-- [end:refused]
    assert kit.job(job.id).status is JobStatus.PENDING


# --8<-- [start:declared]
@cron("0 2 * * *", tz="Europe/Berlin", concurrency=ConcurrencyLimit(key="warehouse", limit=1))
def nightly_export(event):
    """At most one fire of the key "warehouse" runs at once, this one's or another job's."""
    # --8<-- [end:declared]


def test_a_declared_schedule_takes_a_limit_in_its_digest():
    (declaration,) = nightly_export.__schedule_sdk_declared__
    assert declaration.to_dict()["concurrency"] == {"key": "warehouse", "limit": 1}
    assert declaration.spec(datetime(2031, 1, 1, tzinfo=UTC)).concurrency == ConcurrencyLimit(
        key="warehouse", limit=1
    )
