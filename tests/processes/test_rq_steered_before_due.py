"""A stock ``rq worker`` fires nothing whose cancel, pause or reschedule returned before its due
instant (tests/integration/behaviour/test_steered_before_due.py is the same with the worker's
in-process consumer, on every backend): the SDK's pump releases the entries, a real ``rq worker``
process claims and fires them, hundreds of one-shots steered in the last 10 ms before they are due
(:mod:`tests.support.steering`)."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest

from schedule_sdk import OneShotSpec
from schedule_sdk.substrates.rq.pump import DuePump
from tests.conftest import COMBINATIONS
from tests.support.rq_fixtures import ROOT, env_of, read_events
from tests.support.steering import TOPIC, steer_before_due
from tests.support.waiting import HANG, wait_until


@pytest.mark.parametrize(
    "backend_combination", [p for p in COMBINATIONS if p.id in ("sqlite-rq", "postgres-rq")], indirect=True
)
@pytest.mark.parametrize("action", ["cancel", "pause", "reschedule"])
def test_a_stock_rq_worker_fires_nothing_steered_before_its_due_instant(backend, tmp_path, action):
    h = backend.harness()  # no worker of the SDK's: its pump alone releases, the rq worker fires
    settings = backend.settings()
    events = tmp_path / "events"
    command = [
        sys.executable, "-m", "rq.cli", "worker", "--url", settings["redis_url"],
        "--serializer", "rq.serializers.JSONSerializer", "--worker-class", "rq.worker.SimpleWorker",
        settings["rq_queue"],
    ]  # fmt: skip
    env = env_of(
        settings, SCHEDULE_LISTENER_MODULES="tests.support.rq_listeners", SDK_TEST_EVENTS=str(events)
    )
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    pump = DuePump(h.container.queue())
    pump.start()
    try:
        clock = h.container.store_time()
        assert clock.claim_now() is not None
        steered = steer_before_due(h.service, clock, action)
        jobs, before = steered.jobs, steered.before
        # the rq worker fires in due order: once a job due after them all has completed, it is done
        marker = h.service.schedule_at(
            OneShotSpec(topic=TOPIC, run_at=jobs[-1].run_at + timedelta(milliseconds=50), timezone="UTC")
        )
        assert wait_until(lambda: h.job(marker.id).status.value == "completed")
    finally:
        pump.stop()
        worker.terminate()
        try:  # rq's own shutdown can stall closing its pubsub connection: what it fired is judged
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(HANG)
        finally:
            log.close()  # worker.log stays in tmp_path
    fired = {row[0] for row in read_events(events)}
    assert marker.id in fired
    assert [job.id for job in before if job.id in fired] == []
