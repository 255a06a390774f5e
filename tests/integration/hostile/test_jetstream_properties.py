"""Generated hostile ScheduleTimer bodies through the JetStream intake, on each timer store: a
body is stored or dead-lettered, never redelivered, and the valid commands of other tenants sent
around it are stored within a second or so."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import given

from schedule_sdk.timer import Timer, TimerSettings
from tests.support import hostile
from tests.support.timer_fixtures import command, store_settings
from tests.support.timer_probe import Probe
from tests.support.waiting import wait_until

pytestmark = pytest.mark.nats

#: How soon the valid neighbours must be stored (the consumer fetches every 0.5 s at most).
STORED_WITHIN = 1.5
LATER = 3_600_000  # ms: due long after the test; only "stored" is looked at
_numbers = itertools.count()


@pytest.fixture
def probe(nats_names: dict[str, str]) -> Iterator[Probe]:
    probe = Probe(nats_names)
    yield probe
    probe.close()


@pytest.fixture
def timer(timer_db: str, nats_names: dict[str, str]) -> Iterator[Timer]:
    values = {**store_settings(timer_db), "lease_seconds": 2.0, "retry_delay_ms": 200, "heal_interval": 0}
    made = Timer(TimerSettings.load({**values, **nats_names}, environ={}))
    made.start()
    yield made
    made.close()


def settled(probe: Probe) -> bool:
    info = probe.nats.run(
        probe.nats.js.consumer_info(probe.names["command_stream"], probe.names["consumer"]), 5
    )
    return info.num_ack_pending == 0 and info.num_pending == 0 and info.num_redelivered == 0


def test_a_hostile_body_never_holds_up_the_commands_of_other_tenants(timer: Timer, probe: Probe) -> None:
    probe.listen()

    @hostile.HOSTILE_FEW
    @given(body=hostile.timer_bodies)
    def check(body: bytes) -> None:
        n = next(_numbers)
        before, after = command("tenant-a", f"ok-{n}-a", ms=LATER), command("tenant-b", f"ok-{n}-b", ms=LATER)
        probe.send_many([before, body, after])
        assert wait_until(
            lambda: all(timer.queries.get(c.tenant_id, c.service_call_id) for c in (before, after)),
            timeout=STORED_WITHIN,
        ), f"the commands around {body[:120]!r} were not stored in time"
        assert wait_until(lambda: settled(probe), timeout=5)  # acked or terminated, never redelivered

    check()
