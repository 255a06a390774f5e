"""SQLite: the store's writer never checkpoints inside a commit; the store's thread does."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from schedule_sdk import OneShotSpec
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.domain.ids import new_id
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.ports import WorkerInfo


def test_the_writer_does_not_checkpoint_and_the_store_thread_keeps_the_wal_copied(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    engine = make_engine(f"sqlite:///{path}")
    schema.upgrade(engine)
    store = SQLAlchemyJobStore(engine)
    try:
        now = datetime.now(UTC)
        for _ in range(250):  # one write transaction each, as outcomes at a steady rate are
            spec = OneShotSpec(topic="t.ckpt", run_at=now + timedelta(hours=1), timezone="UTC")
            with store.transaction() as tx:
                tx.insert(ScheduledJob.first_of(spec, new_id(), now))
        writer = store.connections.writer_conn
        assert writer is not None
        driver = writer.connection.driver_connection
        assert driver is not None
        assert driver.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        checkpoints = store.connections.checkpoints
        assert checkpoints is not None
        commits = checkpoints._commits
        assert commits >= 250
        # Every 100 commits, then the quiet spell: every commit is checkpointed in the end.
        deadline = time.monotonic() + 10
        while checkpoints._done < commits and time.monotonic() < deadline:
            time.sleep(0.01)
        assert checkpoints._done == commits, "the store's thread did not checkpoint what was written"
    finally:
        store.close()


def test_a_heartbeat_commits_light_and_asks_for_no_checkpoint_of_its_own(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    schema.upgrade(engine)
    store = SQLAlchemyJobStore(engine)
    try:
        checkpoints = store.connections.checkpoints
        assert checkpoints is not None
        now = datetime.now(UTC)
        worker = WorkerInfo(id="w1", host="h", pid=1, substrate="sql", started_at=now, last_beat=now)
        for _ in range(3):
            store.registry.beat(worker)
        # Light commits only: no checkpoint before the first one's ``linger`` (30 s), and no thread.
        assert checkpoints._commits == 3 and checkpoints._light and checkpoints._done == 0
        assert checkpoints._thread is None
        spec = OneShotSpec(topic="t.ckpt", run_at=now + timedelta(hours=1), timezone="UTC")
        with store.transaction() as tx:
            tx.insert(ScheduledJob.first_of(spec, new_id(), now))
        deadline = time.monotonic() + 10  # a full commit: checkpointed after a quiet ``idle``
        while checkpoints._done < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert checkpoints._done == 4, "a full commit after heartbeats was not checkpointed"
    finally:
        store.close()
