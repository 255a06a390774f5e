"""A populated database and a real dashboard process, for the browser tests and for
``scripts/dashboard_screenshots.py`` (which takes the README's screenshots from the same data)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from schedule_sdk import (
    Backoff,
    CronRepeat,
    FireOutcome,
    FireRecord,
    IntervalRepeat,
    JobMetadata,
    OneShotSpec,
    RepeatSpec,
    RetryPolicy,
    ScheduleContainer,
)
from tests.integration.examples.support import Process, example_env, free_port
from tests.support.waiting import wait_for

TOKEN = "browser-test-token-0123456789"
CHROMIUM = "/usr/bin/chromium"  # Debian's package (scripts/ensure-services.sh installs it)
TOPICS = ("billing.invoice-due", "mail.send", "reports.nightly", "sync.crm")


@dataclass
class Demo:
    url: str
    billing: list[str]  # the billing.invoice-due one-shots of tenant acme, in creation order


def populate(url: str, *, seed: int = 13) -> Demo:
    """Jobs of several topics, owners and tenants, two repeating ones, and an hour of fire history
    (with failures and the odd slow minute), written through the service and the store."""
    rng = random.Random(seed)
    container = ScheduleContainer()
    container.config.from_dict({"database_url": url})
    service, store = container.schedule_service(), container.store()
    now = datetime.now(UTC)
    service.schedule_repeat(
        RepeatSpec(
            topic="reports.nightly",
            timezone="Europe/Berlin",
            repeat=CronRepeat(expression="30 2 * * *"),
            metadata=JobMetadata(owner_id="ops", tenant_id="acme"),
        )
    )
    service.schedule_repeat(
        RepeatSpec(topic="sync.crm", timezone="UTC", repeat=IntervalRepeat(every_ms=300_000))
    )
    for i in range(8):
        service.schedule_at(
            OneShotSpec(
                topic="mail.send",
                run_at=now + timedelta(minutes=10 + i),
                timezone="UTC",
                payload={"to": f"user{i}@example.org", "note": "<script>alert('hi')</script>"},
                metadata=JobMetadata(tenant_id="globex"),
            )
        )
    billing = []
    for i in range(60):
        spec = OneShotSpec(
            topic="billing.invoice-due",
            run_at=now + timedelta(hours=1, minutes=i),
            timezone="Europe/Berlin",
            payload={"invoice": f"INV-{1000 + i}", "amount_cents": 1250 + i},
            metadata=JobMetadata(owner_id=f"user-{i % 4}", tenant_id="acme"),
            retry=RetryPolicy(attempts=3, backoff=Backoff(type="exponential", delay_ms=500)),
        )
        billing.append(service.schedule_at(spec).id)
    fires = []
    for minute in range(60):
        slow = minute in (17, 18, 44)
        for n in range(rng.randint(20, 45)):
            topic = rng.choice(TOPICS)
            failed = rng.random() < (0.25 if topic == "sync.crm" else 0.04)
            late = int(rng.expovariate(1 / (900 if slow else 12)))
            fired = now - timedelta(minutes=60 - minute, seconds=rng.random() * 59)
            fires.append(
                FireRecord(
                    job_id=rng.choice(billing),
                    topic=topic,
                    occurrence=1,
                    attempt=1 + (n % 7 == 0),
                    due_at=fired - timedelta(milliseconds=late),
                    fired_at=fired,
                    lateness_ms=late,
                    duration_ms=int(rng.expovariate(1 / 30)),
                    outcome=FireOutcome.FAILED if failed else FireOutcome.SUCCEEDED,
                    error="TimeoutError: CRM did not answer in 5 s" if failed else None,
                    worker_id=f"worker-{(n % 3) + 1}.internal:{4100 + n % 3}:a1b2c3",
                )
            )
    with store.transaction() as tx:
        tx.record_fires(fires)
    container.shutdown_resources()
    return Demo(url, billing)


class DashboardServer:
    """``schedule-sdk dashboard`` as a real process on a free loopback port."""

    def __init__(self, url: str, log: Path, *, token: str | None = TOKEN) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        args = ["-m", "schedule_sdk", "--database-url", url, "dashboard", "--port", str(self.port)]
        self.process = Process(args, example_env(SCHEDULE_DASHBOARD_TOKEN=token), log)
        wait_for(self._up, f"the dashboard on port {self.port}\n{self.process.output()}", timeout=30)

    def _up(self) -> bool:
        assert self.process.alive(), self.process.output()
        try:
            return httpx.get(self.base + "/", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> int:
        return self.process.stop()
