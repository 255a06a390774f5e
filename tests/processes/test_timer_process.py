"""The timer-service process, really killed: SIGTERM stops it cleanly; SIGKILL while timers are
due, a crash between publish and mark-Reached, and a NATS restart mid-run lose no timer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pytest
import sqlalchemy as sa

from schedule_sdk.timer import ScheduleTimer
from tests.support import control
from tests.support.timer_fixtures import command, store_engine, store_env
from tests.support.timer_probe import Probe, read_all
from tests.support.waiting import HANG, wait_until

pytestmark = [pytest.mark.nats, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


class TimerProcess:
    """``python -m schedule_sdk.timer`` with TIMER_* settings; its log goes to a file."""

    #: Every one started and not yet reaped (``_no_timer_process_left`` kills what a test left).
    started: ClassVar[list[TimerProcess]] = []

    def __init__(
        self, names: dict[str, str], db: str, log: Path, module: str = "schedule_sdk.timer", **env: str
    ) -> None:
        environ = dict(os.environ, PYTHONPATH=str(ROOT), TIMER_LEASE_SECONDS="1.5", **store_env(db))
        environ.update({f"TIMER_{k.upper()}": v for k, v in names.items()})
        environ.update(TIMER_RETRY_DELAY_MS="200", TIMER_POLLING_INTERVAL="500", **env)
        self.log = log
        self.offset = log.stat().st_size if log.exists() else 0
        with log.open("a") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", module], env=environ, cwd=ROOT,
                                         stdout=out, stderr=out)  # fmt: skip
        TimerProcess.started.append(self)
        assert wait_until(lambda: "timer service ready" in self.output() or self.proc.poll() is not None, 30)
        assert self.proc.poll() is None, self.output()

    def output(self) -> str:
        return self.log.read_text()[self.offset :]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


@pytest.fixture(autouse=True)
def _no_timer_process_left() -> Iterator[None]:
    """Kill every timer service a test started and left running (after a failed assertion, one
    kept retrying its stopped broker and spent a quarter of a core for the rest of the run)."""
    yield
    for process in TimerProcess.started:
        if process.proc.poll() is None:
            process.kill()
    TimerProcess.started.clear()


@pytest.fixture
def probe(nats_names):
    probe = Probe(nats_names)
    probe.ensure_streams()
    yield probe
    probe.close()


def _reached(db: str) -> Counter[str]:
    engine = store_engine(db)
    try:
        with engine.begin() as conn:
            return Counter(conn.execute(sa.text("SELECT state FROM timer_schedules")).scalars())
    finally:
        engine.dispose()


def _counts(names: dict[str, str]) -> Counter[tuple[str, str]]:
    return Counter((e.tenant_id, e.payload.service_call_id) for e, _ in read_all(names))


def test_sigterm_stops_the_service_cleanly(nats_names, timer_db, tmp_path, probe):
    service = TimerProcess(nats_names, timer_db, tmp_path / "timer.log")
    probe.send(command(ms=100))
    assert wait_until(lambda: _reached(timer_db)["Reached"] == 1)
    assert service.terminate() == 0
    assert "stopping the timer service" in service.output()


def test_sigkill_while_timers_are_due_loses_none(nats_names, timer_db, tmp_path, probe):
    commands = [command(f"tenant-{i % 10}", f"sc-{i}", ms=1500 + 10 * i) for i in range(200)]
    service = TimerProcess(nats_names, timer_db, tmp_path / "timer.log")
    probe.send_many(commands)
    assert wait_until(lambda: sum(_reached(timer_db).values()) == 200)  # all ingested
    assert wait_until(lambda: 0 < _reached(timer_db)["Reached"])
    service.kill()  # mid-run: some reached, some claimed in flight, most still due
    assert _reached(timer_db)["Scheduled"] > 0
    restarted = TimerProcess(nats_names, timer_db, tmp_path / "timer.log")
    assert wait_until(lambda: _reached(timer_db)["Reached"] == 200)
    counts = _counts(nats_names)
    assert set(counts) == {(c.tenant_id, c.service_call_id) for c in commands}  # every one, at least once
    assert restarted.terminate() == 0


def test_crash_between_publish_and_mark_reached_gives_a_duplicate_never_a_loss(
    nats_names, timer_db, tmp_path, probe
):
    log = tmp_path / "timer.log"
    crashing = TimerProcess(nats_names, timer_db, log, module="tests.procs.timer_crash")
    probe.send(command("tenant-a", "sc-1", ms=200))
    assert crashing.proc.wait(timeout=HANG) == 137  # exited right after the publish
    assert _counts(nats_names) == {("tenant-a", "sc-1"): 1}  # published ...
    assert _reached(timer_db) == {"Scheduled": 1}  # ... but not marked Reached
    restarted = TimerProcess(nats_names, timer_db, log)
    assert wait_until(lambda: _reached(timer_db) == {"Reached": 1})
    events = read_all(nats_names)
    assert [(e.tenant_id, e.payload.service_call_id) for e, _ in events] == [("tenant-a", "sc-1")] * 2
    assert events[0][0].id != events[1][0].id  # a fresh envelope: a duplicate the consumer must absorb
    assert restarted.terminate() == 0


@pytest.fixture
def private_nats(tmp_path) -> Iterator[control.PrivateNats]:
    """A broker of the test's own: restarting the shared one would cut every other test run off."""
    server = control.PrivateNats(tmp_path / "nats")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_nats_restart_mid_run_the_service_reconnects_and_continues(
    nats_names, timer_db, tmp_path, private_nats
):
    nats_names = {**nats_names, "broker_url": private_nats.url}
    probe = Probe(nats_names)
    probe.ensure_streams()
    # 90 timers due over 1-3.7 s, fired while the broker is up
    before = [command(f"tenant-{i % 4}", f"before-{i}", ms=1000 + 30 * i) for i in range(90)]
    service = TimerProcess(nats_names, timer_db, tmp_path / "timer.log")
    probe.send_many(before)
    assert wait_until(lambda: sum(_reached(timer_db).values()) == 90)
    assert wait_until(lambda: _reached(timer_db)["Reached"] > 0)
    # then 10 timers that must fall due while the broker is down: their publishes fail and are
    # retried. Whether the broker stopped before they fell due is judged once it stopped; if a
    # loaded machine took longer than the lead, the broker comes back and ten more follow, with
    # twice the lead (the test never guesses how long storing them and stopping the broker take)
    lead, stored, down_ones, sender = 1500.0, 90, [], probe
    while not down_ones:
        batch = [command("tenant-d", f"down-{stored + i}", ms=lead + 20 * i) for i in range(10)]
        assert wait_until(lambda: _send_ok(sender, batch))  # noqa: B023
        before += batch
        stored += len(batch)
        assert wait_until(lambda: sum(_reached(timer_db).values()) == stored)  # noqa: B023
        private_nats.stop()
        down = datetime.now(UTC)
        down_ones = sorted(c.due_at for c in batch if c.due_at > down)
        if not down_ones:
            private_nats.start()
            if sender is not probe:
                sender.close()
            sender = Probe(nats_names)  # a new connection to the restarted broker
            lead *= 2
            assert lead < 60_000, "the broker never stopped before ten timers fell due"
    if sender is not probe:
        sender.close()
    try:
        # two of them fall due while the broker is down
        assert wait_until(lambda: datetime.now(UTC) > down_ones[min(1, len(down_ones) - 1)])
    finally:
        private_nats.start()
    after = [command("tenant-z", f"after-{i}", ms=300) for i in range(10)]
    sender = Probe(nats_names)
    try:
        assert wait_until(lambda: _send_ok(sender, after))
    finally:
        sender.close()
    assert wait_until(lambda: _reached(timer_db)["Reached"] == stored + 10), service.output()[-2000:]
    counts = _counts(nats_names)
    assert set(counts) == {(c.tenant_id, c.service_call_id) for c in before + after}
    assert "reconnected to NATS" in service.output()
    assert service.terminate() == 0
    probe.close()


def _send_ok(sender: Probe, commands: list[ScheduleTimer]) -> bool:
    try:
        sender.send_many(commands)
        return True
    except Exception:
        time.sleep(0.2)
        return False
