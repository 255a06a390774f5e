"""PostgreSQL behind PgBouncer in transaction pooling: what only that topology has.

The behaviour and contract suites run through PgBouncer with the recommended settings
(``database_pooler=transaction``, LISTEN on a direct ``database_listen_url``); here: a LISTEN
through the pooler is refused at start with a typed error and leaves nothing running, and without
a listen URL another process's job is found by polling.
"""

from __future__ import annotations

import io
import socket
import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from schedule_sdk import InvalidSetting, OneShotSpec, ScheduleContainer, Settings
from schedule_sdk.adapters.sql.watch import check_listen
from schedule_sdk.entrypoints.cli import USAGE, main
from schedule_sdk.errors import ListenNotDelivered
from schedule_sdk.ports import WorkerRegistry, require
from tests.conftest import Backend
from tests.harness import Harness

pytestmark = [pytest.mark.postgres, pytest.mark.pgbouncer]


def _threads(prefix: str) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(prefix)]


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"database_pooler": "none", "database_listen_url": None}, id="pooler-not-declared"),
        pytest.param(
            {"database_pooler": "transaction", "database_listen_url": "pooled"}, id="listen-url-pooled"
        ),
    ],
)
def test_a_worker_whose_listen_goes_through_the_pooler_refuses_to_start(pooled: Backend, overrides) -> None:
    if overrides["database_listen_url"] == "pooled":
        overrides = {**overrides, "database_listen_url": pooled.database_url}
    h = pooled.harness(**overrides)
    before = set(_threads("schedule-sdk"))
    with pytest.raises(ListenNotDelivered) as raised:
        h.worker.start()
    error = raised.value
    assert isinstance(error, InvalidSetting) and error.code == "SCHEDULE_LISTEN_NOT_DELIVERED"
    assert "127.0.0.1:6432" in str(error) and "database_listen_url" in str(error)
    assert not h.worker.running
    assert require(h.store, WorkerRegistry, "the test").workers() == []  # its heartbeat row is gone again
    assert set(_threads("schedule-sdk")) <= before  # no poller, no listener thread left behind


def test_without_a_listen_url_another_process_job_is_found_by_polling(pooled: Backend) -> None:
    """The worker has no LISTEN and learns of a job another process scheduled only by polling; it
    fires it, never before its due time."""
    worker = pooled.harness(database_listen_url=None, poll_interval=0.3).start()
    assert _threads("schedule-sdk-pg-listen") == []
    other = ScheduleContainer()  # another process: its commits do not reach the worker's poller
    other.config.from_dict(pooled.settings(database_listen_url=None))
    try:
        run_at = datetime.now(UTC) + timedelta(seconds=1)
        job = other.schedule_service().schedule_at(
            OneShotSpec(topic="pooled.poll", run_at=run_at, timezone="UTC")
        )
        [event] = worker.wait_events(job.id, 1, timeout=10)
        fired = worker.wait_status(job.id, "completed")
        assert fired.last_fired_at is not None and fired.last_fired_at >= run_at
        assert event.scheduled_job_id == job.id
    finally:
        other.shutdown_resources()


def test_the_pooler_settings_are_checked() -> None:
    with pytest.raises(InvalidSetting, match="database_pooler must be 'none' or 'transaction'"):
        Settings.load({"database_pooler": "session"}, environ={})
    with pytest.raises(InvalidSetting, match="needs a PostgreSQL database_url"):
        Settings.load({"database_pooler": "transaction"}, environ={})
    with pytest.raises(InvalidSetting, match="database_listen_url must be a PostgreSQL URL"):
        Settings.load({"database_listen_url": "sqlite:///x.db"}, environ={})
    settings = Settings.load(
        {},
        environ={
            "SCHEDULE_DATABASE_POOLER": "transaction",
            "SCHEDULE_DATABASE_URL": "postgresql+psycopg://u@h:6432/d",
            "SCHEDULE_DATABASE_LISTEN_URL": "postgresql+psycopg://u@h/d",
        },
    )
    assert (settings.database_pooler, settings.database_listen_url) == (
        "transaction",
        "postgresql+psycopg://u@h/d",
    )


def test_the_engines_prepare_nothing_behind_the_pooler(pooled: Backend) -> None:
    h: Harness = pooled.harness()
    service = h.container.schedule_service()
    for _ in range(8):  # past psycopg's automatic threshold (5) and the explicit prepare of inserts
        service.schedule_at(
            OneShotSpec(topic="pooled.prepare", run_at=datetime.now(UTC) + timedelta(hours=1), timezone="UTC")
        )
    claims = h.store.connections.claims  # type: ignore[attr-defined]  # the claims' own autocommit pool
    for engine in (h.container.engine(), claims):
        with engine.connect() as conn:
            assert conn.connection.driver_connection.prepare_threshold is None  # type: ignore[union-attr]
            assert conn.exec_driver_sql("SELECT count(*) FROM pg_prepared_statements").scalar() == 0


def test_the_worker_command_names_a_listen_through_the_pooler(pooled: Backend, monkeypatch) -> None:
    for name in ("SCHEDULE_DATABASE_POOLER", "SCHEDULE_DATABASE_LISTEN_URL"):
        monkeypatch.delenv(name, raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert main(["--database-url", pooled.database_url, "worker"], out=out, err=err) == USAGE
    assert err.getvalue().startswith("schedule-sdk: error: a notification sent to ")
    assert "SCHEDULE_DATABASE_POOLER" in err.getvalue()


def test_the_listen_check_judges_only_a_database_it_reaches(pooled: Backend) -> None:
    """Direct: delivered, no error. Unreachable: not judged (the watcher retries LISTEN). Pooled: refused."""
    assert check_listen(sa.make_url(pooled.direct_url)) is None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    assert check_listen(sa.make_url(f"postgresql+psycopg://postgres@127.0.0.1:{closed}/x"), timeout=1) is None
    with pytest.raises(ListenNotDelivered):
        check_listen(sa.make_url(pooled.database_url), timeout=1)
