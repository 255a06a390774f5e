"""The timer behind PgBouncer in transaction pooling: it takes the Schedule module's pooler
settings (``TIMER_DATABASE_POOLER``, ``TIMER_DATABASE_LISTEN_URL``); its whole behaviour suite
runs through the pooler too (the ``pgbouncer`` case of ``timer_db``). Here: what it refuses."""

from __future__ import annotations

import pytest

from schedule_sdk.errors import InvalidSetting, ListenNotDelivered
from schedule_sdk.timer import Timer, TimerSettings
from tests.support import services
from tests.support.timer_fixtures import Received, command
from tests.support.waiting import wait_until


def test_the_pooler_settings_come_from_the_timer_environment():
    url = "postgresql+psycopg://timer@127.0.0.1:6432/timer"
    listen = "postgresql+psycopg://timer@127.0.0.1:5432/timer"
    environ = {
        "TIMER_DB_PATH": url,
        "TIMER_DATABASE_POOLER": "transaction",
        "TIMER_DATABASE_LISTEN_URL": listen,
    }
    settings = TimerSettings.load(environ=environ)
    assert (settings.database_pooler, settings.database_listen_url) == ("transaction", listen)


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"db_path": "timers.db", "database_pooler": "transaction"}, "PostgreSQL db_path"),
        ({"db_path": "postgresql+psycopg://h/db", "database_pooler": "session"}, "'none' or 'transaction'"),
        ({"db_path": "postgresql+psycopg://h/db", "database_listen_url": "sqlite:///x.db"}, "PostgreSQL URL"),
    ],
)
def test_pooler_settings_that_cannot_work_are_refused(values, names):
    with pytest.raises(InvalidSetting, match=names):
        TimerSettings.load(values, environ={})


@pytest.mark.postgres
@pytest.mark.pgbouncer
def test_behind_the_pooler_without_its_setting_the_timer_refuses_to_start(request, empty_postgres_databases):
    request.getfixturevalue("pgbouncer")
    url = empty_postgres_databases.lease("timer_pooler")
    try:
        settings = TimerSettings.load(
            {"db_path": services.through_pgbouncer(url), "broker_url": "inprocess", "heal_interval": 0},
            environ={},
        )
        timer = Timer(settings)
        try:
            with pytest.raises(ListenNotDelivered, match="TIMER_DATABASE_POOLER"):
                timer.start()
        finally:
            timer.close()
    finally:
        empty_postgres_databases.give_back(url)


@pytest.mark.postgres
@pytest.mark.pgbouncer
def test_behind_the_pooler_without_a_listen_url_the_timer_polls(request, empty_postgres_databases):
    request.getfixturevalue("pgbouncer")
    url = empty_postgres_databases.lease("timer_pooler")
    try:
        values = {
            "db_path": services.through_pgbouncer(url),
            "database_pooler": "transaction",
            "broker_url": "inprocess",
            "heal_interval": 0,
            "polling_interval_ms": 200,
        }
        with Timer(TimerSettings.load(values, environ={})) as timer:
            received = Received()
            timer.bus.subscribe(received)
            timer.schedule(command("tenant-a", "sc-1", ms=100))
            assert wait_until(lambda: received.keys() == [("tenant-a", "sc-1")])
    finally:
        empty_postgres_databases.give_back(url)


def test_the_timer_command_takes_the_pooler_options(tmp_path, caplog):
    from schedule_sdk.entrypoints.timer_service import main

    db = str(tmp_path / "timers.db")
    assert main(["--db-path", db, "--broker-url", "inprocess", "--database-pooler", "transaction"]) == 2
    assert "database_pooler=transaction needs a PostgreSQL db_path" in caplog.text
    listen = ["--database-listen-url", "sqlite:///x.db"]
    assert main(["--db-path", db, "--broker-url", "inprocess", *listen]) == 2
    assert "database_listen_url must be a PostgreSQL URL" in caplog.text
